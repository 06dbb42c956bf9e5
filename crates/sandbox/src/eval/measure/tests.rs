use super::disturb::{gpu_disturbance, run_gpu};
use super::*;
use crate::eval::contract;
use harness_core::criterion::Criterion;
use harness_core::criterion::strict::{DEFAULT_REPETITIONS, DEFAULT_REPLICAS};
use harness_core::task::Metric;

fn run(wall: f64, cpu: f64, throttled: Option<u64>) -> RunRecord {
    RunRecord {
        round: 1,
        warmup: false,
        variant: "s0".into(),
        bench: "b".into(),
        wall_s: wall,
        value: Some(wall),
        exit_code: 0,
        user_s: cpu,
        sys_s: 0.0,
        max_rss_kb: 0,
        involuntary_switches: 0,
        throttled,
        cpu_probe_ms: None,
        disturbed: None,
        output_digest: None,
        lingering_killed: 0,
        leftovers_removed: 0,
        replica: 0,
        gpu: None,
        reps: Vec::new(),
        exec_s: None,
        native_s: None,
        rep_digests: Vec::new(),
    }
}

fn device(index: u32, energy: Option<f64>, reasons: &[&str]) -> harness_telemetry::RunTelemetry {
    harness_telemetry::RunTelemetry {
        device_index: index,
        uuid: format!("GPU-{index}"),
        name: "H100".into(),
        samples: 3,
        duration_s: 0.2,
        gpu_util: None,
        mem_util: None,
        mem_used_bytes: None,
        power_w: None,
        sm_clock_mhz: None,
        mem_clock_mhz: None,
        temperature_c: None,
        energy_j: energy,
        energy_counter_j: None,
        throttled: !reasons.is_empty(),
        throttle_reasons: reasons.iter().map(|r| r.to_string()).collect(),
        incomplete: None,
        notes: Vec::new(),
    }
}

fn report(devices: Vec<harness_telemetry::RunTelemetry>) -> harness_telemetry::RunReport {
    harness_telemetry::RunReport {
        tag: RunTag {
            variant: "s0".into(),
            round: 3,
            run: 0,
        },
        duration_s: 0.2,
        devices,
        samples: Vec::new(),
    }
}

#[test]
fn gpu_runs_sum_energy_over_devices_and_flag_throttling() {
    let g = run_gpu(report(vec![
        device(0, Some(40.0), &[]),
        device(1, Some(2.5), &[]),
    ]));
    assert_eq!(g.energy_j, Some(42.5));
    assert!(!g.throttled);
    // A device with the driver's energy counter counts by the counter, not the integral.
    let mut counted = device(1, Some(2.5), &[]);
    counted.energy_counter_j = Some(7.0);
    let g = run_gpu(report(vec![device(0, Some(40.0), &[]), counted]));
    assert_eq!(g.energy_j, Some(47.0));
    assert_eq!(gpu_disturbance(&Ok(g)), None);
    // One device without power: the run's energy is unknown, not the other's alone.
    let g = run_gpu(report(vec![
        device(0, Some(40.0), &[]),
        device(1, None, &[]),
    ]));
    assert_eq!(g.energy_j, None);
    let g = run_gpu(report(vec![
        device(0, Some(40.0), &[]),
        device(1, Some(1.0), &["sw_thermal_slowdown"]),
    ]));
    assert!(g.throttled);
    assert_eq!(
        gpu_disturbance(&Ok(g)).as_deref(),
        Some("GPU clocks throttled: GPU 1 (sw_thermal_slowdown)")
    );
    let mut lost = device(0, Some(1.0), &[]);
    lost.incomplete = Some("GPU 0 lost at t=0.1 s".into());
    assert_eq!(
        gpu_disturbance(&Ok(run_gpu(report(vec![lost])))).as_deref(),
        Some("GPU telemetry incomplete: GPU 0 lost at t=0.1 s")
    );
    assert_eq!(
        gpu_disturbance(&Err("the sampler stopped".into())).as_deref(),
        Some("no GPU telemetry for the run: the sampler stopped")
    );
}

#[test]
fn energy_per_round_and_ratios() {
    let with = |variant: &str, round: u32, bench: &str, energy: f64, throttled: bool| {
        let mut r = run(0.1, 0.1, None);
        r.variant = variant.into();
        r.round = round;
        r.bench = bench.into();
        r.gpu = Some(RunGpu {
            energy_j: Some(energy),
            throttled,
            devices: Vec::new(),
        });
        r
    };
    let mut log = BenchLog {
        shared_code_only: Default::default(),
        schema_version: 1,
        instance_id: "t".into(),
        sample_variant: None,
        variants: vec!["base".into(), "human".into(), "s0".into()],
        benches: Vec::new(),
        schedule: Schedule {
            criterion: Criterion::STRICT,
            warmup_rounds: 0,
            min_rounds: 1,
            max_rounds: 2,
            max_seconds: 10.0,
            cpuset: None,
            replicas: 1,
            repetitions: 1,
            max_replicas: 1,
        },
        rounds: Vec::new(),
        runs: vec![
            // Per round: every bench's energy adds up.
            with("base", 0, "a", 30.0, false),
            with("base", 0, "b", 10.0, false),
            with("base", 1, "a", 50.0, false),
            with("base", 1, "b", 10.0, false),
            with("human", 0, "a", 10.0, false),
            with("human", 0, "b", 10.0, false),
            with("s0", 0, "a", 20.0, true),
            with("s0", 0, "b", 5.0, false),
        ],
        decided_after: BTreeMap::new(),
        stopped_undecided: BTreeMap::new(),
        dropped: BTreeMap::new(),
        stop_reason: String::new(),
        seconds: 0.0,
        shared: BTreeMap::from([("s1".to_string(), "human".to_string())]),
        telemetry_lines: Vec::new(),
        warnings: Vec::new(),
        equivalence: Vec::new(),
    };
    assert_eq!(log.energy_per_round("base"), Some(50.0));
    let e = log.energy("s0").unwrap();
    assert_eq!((e.base_j, e.human_j, e.patch_j), (50.0, 20.0, 25.0));
    assert_eq!((e.base_over_patch, e.human_over_patch), (2.0, 0.8));
    assert_eq!(e.throttled_runs, 1);
    // A sample sharing human's tree takes human's energy.
    assert_eq!(log.energy("s1").unwrap().patch_j, 20.0);
    // Without telemetry: no energy at all.
    log.runs[0].gpu = None;
    assert_eq!(log.energy_per_round("base"), None);
    assert!(log.energy("s0").is_none());
}

fn task_with(benches: &[(u32, u32, u32)]) -> Task {
    let dir = tempfile::Builder::new().prefix("task").tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    std::fs::write(dir.path().join("h.patch"), "x").unwrap();
    let mut toml =
        String::from("[source]\npath='repo'\n[human]\npatch='h.patch'\n[test]\ncommand='true'\n");
    for (i, (w, r, m)) in benches.iter().enumerate() {
        toml.push_str(&format!(
            "[[bench]]\nname='b{i}'\ncommand='true'\nwarmups={w}\nruns={r}\nmax_runs={m}\n"
        ));
    }
    harness_store::task_folder::parse_task(dir.path(), &dir.path().join("task.toml"), &toml)
        .unwrap()
}

fn rule(criterion: Criterion) -> DecisionRule {
    DecisionRule {
        criterion,
        thresholds: harness_core::metrics::Thresholds::default(),
        seed: 0,
        confidence: 0.95,
        resamples: 100,
        estimator: harness_core::estimator::Estimator::Mean,
    }
}

#[test]
fn schedules_from_task_and_command_line() {
    let task = task_with(&[(1, 10, 30), (2, 5, 40)]);
    let none = Budget {
        min_rounds: None,
        max_rounds: None,
        max_seconds: None,
        timeout_scale: 1.0,
        replicas: None,
        repetitions: None,
    };
    let s = schedule(&task, &rule(Criterion::STRICT), &none, Some("1".into()));
    // Two warmups in each of the default three containers.
    assert_eq!(s.replicas, DEFAULT_REPLICAS);
    assert_eq!(
        (s.warmup_rounds, s.min_rounds, s.max_rounds),
        (2 * DEFAULT_REPLICAS, 5, 40),
        "10 timed runs: ceil(10 / 3) = 4 rounds of three, raised to the 5 an interval needs"
    );
    assert_eq!(s.max_seconds, 900.0);
    assert_eq!(s.cpuset.as_deref(), Some("1"));
    assert_eq!(s.repetitions, DEFAULT_REPETITIONS);
    // gso: a fixed number of rounds, every one counted, as GSO does.
    let g = schedule(&task, &rule(Criterion::GSO), &none, None);
    assert_eq!(
        (g.warmup_rounds, g.min_rounds, g.max_rounds, g.repetitions),
        (0, 10, 10, 1)
    );
    // The command line overrides; max is never below min.
    let cli = Budget {
        min_rounds: Some(4),
        max_rounds: Some(2),
        max_seconds: Some(5.0),
        timeout_scale: 1.0,
        replicas: None,
        repetitions: Some(2),
    };
    let c = schedule(&task, &rule(Criterion::STRICT), &cli, None);
    assert_eq!(
        (c.min_rounds, c.max_rounds, c.max_seconds, c.repetitions),
        (4, 4, 5.0, 2)
    );
}

#[test]
fn rounds_rotate_and_samples_stop_when_decided() {
    let m = [0, 1, 2];
    assert_eq!(round_order(&m, 0), vec![0, 1, 2]);
    assert_eq!(round_order(&m, 1), vec![1, 2, 0]);
    assert_eq!(round_order(&m, 3), vec![2, 1, 0], "odd n: mirror rows");
    assert_eq!(
        round_order(&m, 6),
        round_order(&m, 0),
        "a cycle of 2n rounds"
    );
    assert!(round_order::<u8>(&[], 4).is_empty());
    // Over one cycle, for every n: each variant in each position equally often, and
    // each ordered pair adjacent equally often (no variant always follows the same one).
    for n in 1..=8usize {
        let members: Vec<usize> = (0..n).collect();
        let cycle = if n % 2 == 0 { n } else { 2 * n };
        let mut position = vec![vec![0; n]; n];
        let mut follows = vec![vec![0; n]; n];
        for r in 0..cycle {
            let row = round_order(&members, r as u32);
            let mut sorted = row.clone();
            sorted.sort();
            assert_eq!(sorted, members, "n={n}: a permutation");
            for (p, &v) in row.iter().enumerate() {
                position[v][p] += 1;
            }
            for w in row.windows(2) {
                follows[w[0]][w[1]] += 1;
            }
        }
        let per_position = cycle / n;
        assert!(
            position.iter().flatten().all(|&c| c == per_position),
            "n={n}"
        );
        if n > 1 {
            let per_pair = cycle * (n - 1) / (n * (n - 1));
            for (a, row) in follows.iter().enumerate() {
                for (b, &c) in row.iter().enumerate() {
                    assert_eq!(c, if a == b { 0 } else { per_pair }, "n={n} {a}->{b}");
                }
            }
        }
    }
    let strict = Schedule {
        criterion: Criterion::STRICT,
        warmup_rounds: 1,
        min_rounds: 10,
        max_rounds: 30,
        max_seconds: 60.0,
        cpuset: None,
        replicas: 1,
        repetitions: 1,
        max_replicas: 1,
    };
    assert!(
        !sample_finished(&strict, 9, true),
        "below the minimum, even if decided"
    );
    assert!(sample_finished(&strict, 10, true));
    assert!(
        !sample_finished(&strict, 10, false),
        "undecided: more rounds"
    );
    assert!(
        sample_finished(&strict, 30, false),
        "budget spent: inconclusive"
    );
    let gso = Schedule {
        criterion: Criterion::GSO,
        max_rounds: 10,
        ..strict
    };
    assert!(sample_finished(&gso, 10, false));
    assert!(!sample_finished(&gso, 9, true));
}

#[test]
fn values_from_output() {
    let p = Metric::Pattern(regex::Regex::new(r"Execution time: ([0-9.eE+-]+)s").unwrap());
    let once = ReportedMetric {
        value: Some(2.5),
        printed: 1,
    };
    assert_eq!(run_value(&p, 9.0, Some(&once)), Ok(2.5));
    let twice = ReportedMetric {
        value: None,
        printed: 2,
    };
    assert!(
        run_value(&p, 9.0, Some(&twice))
            .unwrap_err()
            .contains("2 times")
    );
    let never = ReportedMetric {
        value: None,
        printed: 0,
    };
    assert!(
        run_value(&p, 9.0, Some(&never))
            .unwrap_err()
            .contains("no figure")
    );
    assert!(run_value(&p, 9.0, None).is_err());
    let j = Metric::JsonKey("secs".into());
    assert_eq!(run_value(&j, 9.0, Some(&once)), Ok(2.5));
    assert_eq!(run_value(&Metric::Wall, 0.5, None), Ok(0.5));
    assert!(run_value(&Metric::Wall, 0.0, None).is_err());
}

#[test]
fn known_disturbances() {
    let normal: Vec<RunRecord> = (0..4).map(|_| run(0.5, 0.49, Some(0))).collect();
    let h: Vec<&RunRecord> = normal.iter().collect();
    assert_eq!(disturbance(&run(0.5, 0.49, Some(0)), &h), None);
    // Throttled by the CPU quota: always a disturbance.
    assert!(
        disturbance(&run(0.5, 0.49, Some(3)), &h)
            .unwrap()
            .contains("throttled")
    );
    // Off-CPU for 40% of a run that is usually 98% on-CPU.
    assert!(
        disturbance(&run(0.8, 0.48, None), &h)
            .unwrap()
            .contains("descheduled")
    );
    // Slower but on-CPU all along, probes unknown: not a known event.
    assert_eq!(disturbance(&run(0.8, 0.79, None), &h), None);
    // A bench that sleeps or waits on I/O is never judged by its CPU share.
    let sleepy: Vec<RunRecord> = (0..4).map(|_| run(0.5, 0.05, None)).collect();
    let hs: Vec<&RunRecord> = sleepy.iter().collect();
    assert_eq!(disturbance(&run(0.5, 0.01, None), &hs), None);
    // Too little history to judge.
    assert_eq!(disturbance(&run(0.8, 0.3, None), &h[..2]), None);
    // The CPU changed speed during the run: disturbed. Within 30%: fine.
    let probed = |before, after| RunRecord {
        cpu_probe_ms: Some([before, after]),
        ..run(0.8, 0.79, Some(0))
    };
    assert!(
        disturbance(&probed(1.2, 2.4), &h)
            .unwrap()
            .contains("speed changed")
    );
    assert!(disturbance(&probed(2.4, 1.2), &h).is_some());
    assert_eq!(disturbance(&probed(1.3, 1.1), &h), None);
    assert_eq!(
        disturbance(&probed(2.4, 2.4), &h),
        None,
        "slow all along is judged by its round"
    );
}

#[test]
fn runs_at_another_speed_than_their_round_are_flagged() {
    let with = |v: &str, p: f64| RunRecord {
        variant: v.into(),
        cpu_probe_ms: Some([p, p]),
        ..run(0.5, 0.5, None)
    };
    // Base ran while the CPU was at half speed; human and the sample did not.
    let mut round = vec![with("base", 2.4), with("human", 1.2), with("s0", 1.25)];
    flag_round(&mut round);
    assert!(
        round[0]
            .disturbed
            .as_deref()
            .unwrap()
            .contains("off the rest of its round")
    );
    assert!(round[1].disturbed.is_none() && round[2].disturbed.is_none());
    // All at half speed: comparable, nothing flagged.
    let mut slow = vec![with("base", 2.4), with("human", 2.3), with("s0", 2.5)];
    flag_round(&mut slow);
    assert!(slow.iter().all(|r| r.disturbed.is_none()));
    // Warmups are left alone, and too few probes say nothing.
    let mut warm = vec![
        RunRecord {
            warmup: true,
            ..with("base", 9.0)
        },
        with("human", 1.2),
        with("s0", 1.2),
    ];
    flag_round(&mut warm);
    assert!(warm.iter().all(|r| r.disturbed.is_none()));
}

#[test]
fn a_runs_figure_is_the_best_of_its_repetitions() {
    let rep = |wall_ns: u64, metric: serde_json::Value| {
        serde_json::json!({"wall_ns": wall_ns, "user_s": 0.0, "sys_s": 0.0, "metric": metric,
                           "output_digest": "sha256:x"})
    };
    let result = |reps: Vec<serde_json::Value>| -> run::TimerResult {
        let mut line = contract::blank();
        line["wall_ns"] = 2_000_000_000u64.into();
        line["reps"] = reps.into();
        // Each repetition answered its own seed's question.
        line["reps_digests_differ"] = true.into();
        run::parse_result(&line.to_string(), &|s: &str| s.to_string()).unwrap()
    };
    let null = serde_json::Value::Null;
    let mut task = task_with(&[(0, 5, 10)]);
    let three = result(vec![
        rep(3_000_000_000, null.clone()),
        rep(2_000_000_000, null.clone()),
        rep(2_500_000_000, null.clone()),
    ]);
    let (figure, reps) = run::exec_figure(&task.benches[0], &three);
    assert_eq!(figure, Ok(2.0), "the fastest wall time");
    assert_eq!(reps, vec![3.0, 2.0, 2.5]);
    // A printed figure where higher is better: the highest.
    task.benches[0].metric = Metric::Pattern(regex::Regex::new("ops: (\\S+)").unwrap());
    task.benches[0].better = harness_core::task::Better::Higher;
    let printed = result(vec![
        rep(1, serde_json::json!({"value": 40.0, "printed": 1})),
        rep(1, serde_json::json!({"value": 55.0, "printed": 1})),
    ]);
    assert_eq!(run::exec_figure(&task.benches[0], &printed).0, Ok(55.0));
    // Every repetition must print it: one that does not makes the run's figure an error.
    let missing = result(vec![
        rep(1, serde_json::json!({"value": 40.0, "printed": 1})),
        rep(1, serde_json::json!({"value": null, "printed": 0})),
    ]);
    assert!(run::exec_figure(&task.benches[0], &missing).0.is_err());
    // The same answer in every repetition: no repetition shows it computed it, so the
    // figure is their mean, never the best.
    let mut same = result(vec![
        rep(1, serde_json::json!({"value": 40.0, "printed": 1})),
        rep(1, serde_json::json!({"value": 60.0, "printed": 1})),
    ]);
    same.reps_digests_differ = false;
    assert_eq!(run::exec_figure(&task.benches[0], &same).0, Ok(50.0));
}

/// Asserts that every record in `value` has the fields the schema gives it, no fewer, no more.
fn same_fields(
    fields: &std::collections::BTreeMap<String, contract::Field>,
    value: &serde_json::Value,
    at: &str,
) {
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{at}: not an object"));
    let ours: BTreeSet<&String> = object.keys().collect();
    let theirs: BTreeSet<&String> = fields.keys().collect();
    assert_eq!(
        ours, theirs,
        "the fields of {at:?} as read and in the schema"
    );
    for (name, spec) in fields {
        let here = &object[name];
        if let (Some(inner), false) = (&spec.fields, here.is_null()) {
            same_fields(inner, here, &format!("{at}{name}."));
        }
        if let (Some(items), Some(list)) = (&spec.items, here.as_array())
            && let Some(inner) = &items.fields
        {
            for (i, item) in list.iter().enumerate() {
                same_fields(inner, item, &format!("{at}{name}[{i}]."));
            }
        }
    }
}

#[test]
fn the_timer_result_is_the_contracts_fields() {
    // Read and written back, a result with every field (optional ones too) keeps them all:
    // TimerResult and the records in it have the schema's fields, no other.
    let sample = contract::sample();
    let read = run::parse_result(&sample.to_string(), &|s: &str| s.to_string()).unwrap();
    same_fields(
        &contract::SCHEMA.fields,
        &serde_json::to_value(&read).unwrap(),
        "",
    );
    assert_eq!(read.reps.len(), 1);
    assert!(read.metric.is_some() && read.simulated.is_some());
}

#[test]
fn the_timers_line_is_read_strictly() {
    let line = |edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v = contract::sample();
        edit(v.as_object_mut().unwrap());
        run::parse_result(&v.to_string(), &|s: &str| s.to_string())
    };
    let read = line(&|_| {}).unwrap();
    assert_eq!((read.wall_ns, read.cpu_probe_ms), (1, Some([1.5, 1.5])));
    assert!(run::parse_result(&contract::blank().to_string(), &|s: &str| s.to_string()).is_ok());
    let unknown = line(&|m| {
        m.insert("wall_seconds".into(), 1.5.into());
    });
    assert_eq!(
        unknown.unwrap_err(),
        "field \"wall_seconds\": not in the schema"
    );
    let missing = line(&|m| {
        m.remove("oom_kills");
    });
    assert_eq!(missing.unwrap_err(), "field \"oom_kills\": missing");
    let mistyped = line(&|m| {
        m.insert("wall_ns".into(), "1".into());
    });
    assert_eq!(
        mistyped.unwrap_err(),
        "field \"wall_ns\": expected integer, got string"
    );
    let nested = line(&|m| {
        m["reps"][0]
            .as_object_mut()
            .unwrap()
            .remove("output_digest");
    });
    assert_eq!(
        nested.unwrap_err(),
        "field \"reps[0].output_digest\": missing"
    );
    // What the schema cannot say, the read still refuses.
    let negative = line(&|m| {
        m.insert("wall_ns".into(), (-1).into());
    });
    assert!(negative.unwrap_err().contains("expected u64"));
    assert!(
        run::parse_result("{\"wall_ns\": ", &|s: &str| s.to_string())
            .unwrap_err()
            .starts_with("not JSON")
    );
}

#[test]
fn the_simulators_limit_follows_the_benchs_own_time() {
    let bench = harness_core::task::Bench {
        name: "b".into(),
        command: "python3 bench.py".into(),
        warmups: 0,
        runs: 1,
        max_runs: 1,
        timeout: Duration::from_secs(60),
        metric: Metric::Wall,
        better: harness_core::task::Better::Lower,
        metric_unit_s: None,
        output_check: harness_core::task::OutputCheck::Stdout { ignore: Vec::new() },
    };
    // A pyparsing release pair's base takes 2.9 s natively: its count once ran past 125 s.
    let limit = run::simulator_limit(&bench, 1.0, 2.9);
    assert!(limit.as_secs_f64() >= 2.9 * 43.0 * 2.0, "{limit:?}");
    assert_eq!(
        limit.as_secs_f64(),
        60.0 + 2.9 * run::SIM_SLOWDOWN_BOUND + 5.0
    );
    // The configured timeout stays the floor (scaled) for a bench that takes no time.
    assert_eq!(
        run::simulator_limit(&bench, 0.5, 0.0),
        Duration::from_secs(35)
    );
}

/// A task's secret may hold a piece of a field's name (`harness_` of `harness_error`): the
/// result line is read with its names whole, and the secret is taken out of what it says.
#[test]
fn a_secret_that_shares_a_piece_with_a_field_name_leaves_the_line_readable() {
    let secret = "hf_harness_test_0123456789abcdef";
    let secrets = vec![("HF_TOKEN".to_string(), secret.to_string())];
    let redact = |s: &str| harness_core::secrets::redact(s, &secrets);
    let mut line = contract::blank();
    line["stdout_tail"] = serde_json::json!(format!("token {secret} printed"));
    line["changes"] = serde_json::json!({ format!("/tmp/{secret}"): "added" });
    // What a redaction of the whole line does: the field's name is gone.
    assert!(run::parse_result(&redact(&line.to_string()), &|s: &str| s.to_string()).is_err());
    let read = run::parse_result(&line.to_string(), &redact).unwrap();
    assert!(
        !read.stdout_tail.contains("harness_test"),
        "{}",
        read.stdout_tail
    );
    assert!(read.stdout_tail.contains("***"));
    let changed: Vec<&String> = read.changes.keys().collect();
    assert!(
        changed.iter().all(|k| !k.contains("0123456789")),
        "{changed:?}"
    );
}
