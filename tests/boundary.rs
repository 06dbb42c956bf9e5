//! Issue 40: the host boundary. Every container the harness makes keeps Docker's default
//! boundary (root holds no capability beyond Docker's default set, never SYS_ADMIN; a cgroup
//! mount fails; seccomp filters; no new privileges), each timed run's sandbox is still
//! made, and nothing of an image runs as root once its container runs: an image whose every
//! dynamically linked program (sh, git, patch, python3, coreutils) refuses to start as root
//! or with a capability at run time is evaluated, and run by an agent, as any other.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Docker's default capability set (what a plain `docker run` gives root).
const DOCKER_DEFAULT: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// The preload library (tests/fixtures/boundary/refuse_root.c), built here.
fn refuse_root_library(dir: &Path) -> Vec<u8> {
    let out = dir.join("refuse_root.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(repo_root().join("tests/fixtures/boundary/refuse_root.c"))
        .status()
        .expect("gcc (the C compiler the machine has for crates that build C)");
    assert!(built.success(), "gcc failed");
    std::fs::read(&out).unwrap()
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The task image's tag for task `id` (the newest).
fn task_image(id: &str) -> String {
    let out = Command::new("docker")
        .args([
            "images",
            "--format",
            "{{.Repository}}:{{.Tag}}",
            &format!("harness-task/{id}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no image of {id}"))
        .to_string()
}

#[test]
fn nothing_of_an_image_runs_as_root_once_its_container_runs() {
    if !docker_available("nothing_of_an_image_runs_as_root") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lib = refuse_root_library(tmp.path());
    let ds = tmp.path().join("ds");
    // The image also hands the supervisor's folders to the sandbox user, and the install
    // (the sandbox user's, its writes kept) tries to put a program of the image in the
    // supervisor's place, so that root's next exec would run it (the red team's finding on
    // 8716e14). The upload names those folders root's and the supervisor seals its path
    // before anything runs; with neither, this run fails.
    let setup = format!(
        "[image]\nsetup = [\"echo {} | base64 -d > /usr/local/lib/refuse_root.so && echo /usr/local/lib/refuse_root.so > /etc/ld.so.preload\", \"mkdir -p /opt/harness/bin && chown 10001:10001 /opt /opt/harness /opt/harness/bin\"]\n\
         [install]\ncommands = [\"mv /opt/harness/bin/harness-supervisor /opt/harness/bin/moved 2>/dev/null || echo not-moved; cp /bin/true /opt/harness/bin/harness-supervisor 2>/dev/null || echo not-replaced\"]\n",
        base64(&lib)
    );
    make_task(&ds, "wrapped", SLOW, FAST, &setup);
    // GSO's path: a prebuilt image named by reference, no setup, the human its commit.
    let commit = wrapped_prebuilt_image(tmp.path(), &lib);
    let gso = ds.join("wrapped-gso");
    write(
        &gso.join("task.toml"),
        &format!(
            "protected = [\"bench.py\", \"test_*.py\"]\n[source]\nimage = \"{PREBUILT}\"\n\
             [human]\ncommit = \"{commit}\"\n[test]\ncommand = \"python3 test_mod.py\"\ntimeout = 60\n\
             [[bench]]\nname = \"work\"\ncommand = \"python3 bench.py\"\nwarmups = 0\nruns = 2\ntimeout = 30\n\
             [resources]\ncpus = 1\nmemory = \"256m\"\npids = 128\n"
        ),
    );
    let preds = tmp.path().join("preds.jsonl");
    predictions(
        &preds,
        &[
            ("wrapped", Some(&diff("mod.py", SLOW, FAST))),
            ("wrapped-gso", Some(&diff("mod.py", SLOW, FAST))),
        ],
    );
    let out = tmp.path().join("out");
    let o = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "wrap",
        ])
        .arg("--predictions")
        .arg(&preds)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out));
    assert_eq!(o.status.code(), Some(0));
    for id in ["wrapped", "wrapped-gso"] {
        let report = read_json(&out.join(format!("wrap/test-model/{id}/0/report.json")));
        assert_eq!(report["status"], "passed", "{id}: {report}");
        assert_eq!(report["opt_base"], true, "{id}: {report}");
    }
    let human_log =
        std::fs::read_to_string(out.join("wrap/test-model/wrapped-gso/reference/human/apply.log"))
            .unwrap_or_default();
    assert!(
        human_log.contains("HARNESS_APPLY_OK opt_commit"),
        "the human is the image's commit: {human_log}"
    );

    // The agent's path: its set-up (at its image's build, as root: allowed), its command as
    // the sandbox user, the warden's diff.
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        "[agent.fixer]\n\
         setup = [\"id -u > /opt/setup-ran-as\"]\n\
         command = \"printf 'def work(n):\\\\n    return (n - 1) * n * (2 * n - 1) // 6\\\\n' > mod.py; git status --short >/dev/null && echo git-ran\"\n\
         time_limit = 120\n",
    );
    let o = run(harness()
        .args(["agent", "run", "--agent", "fixer"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out));
    assert_eq!(o.status.code(), Some(0));
    let agent_preds = std::fs::read_to_string(out.join("agents/fixer.predictions.jsonl")).unwrap();
    assert!(agent_preds.contains("(n - 1) * n"), "{agent_preds}");
    let log = std::fs::read_to_string(out.join("agents/fixer/wrapped/0.log")).unwrap();
    assert!(
        log.contains("git-ran"),
        "the image's git ran for the agent: {log}"
    );

    for f in files_under(&out) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains("HARNESS-WRAP"),
            "a program of the image ran as root: {}: {text}",
            f.display()
        );
    }

    // The wrapper works: in the same image, a program started by root once the container
    // runs (the harness's supervisor is there) refuses.
    let image = task_image("wrapped");
    let control = Command::new("docker")
        .args(["run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "/bin/sh"])
        .arg(&image)
        .args([
            "-c",
            "mkdir -p /opt/harness/bin && : > /opt/harness/bin/harness-supervisor; /bin/true; echo exit=$?",
        ])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&control.stdout),
        String::from_utf8_lossy(&control.stderr)
    );
    assert!(
        said.contains("HARNESS-WRAP: /usr/bin/true ran with uid 0"),
        "{said}"
    );
    assert!(said.contains("exit=97"), "{said}");
}

const PREBUILT: &str = "harness-test-refuse-root:1";

/// A GSO-style image (built here, not by the harness): the preload of refuse_root.c, and
/// /testbed a repository at base whose objects hold the human's commit (on a branch): its
/// name.
fn wrapped_prebuilt_image(dir: &Path, lib: &[u8]) -> String {
    let ctx = dir.join("prebuilt");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(ctx.join("refuse_root.so"), lib).unwrap();
    write(&ctx.join("mod.py"), SLOW);
    write(&ctx.join("fast.py"), FAST);
    write(
        &ctx.join("test_mod.py"),
        "import mod\nassert mod.work(10) == sum(i * i for i in range(10)), mod.work(10)\nprint('ok')\n",
    );
    // Work enough that the interpreter's start (the same for both) leaves the speedup clear
    // on a busy machine (at 200000 it was 1.4x, undecided on a CI run beside a build).
    write(
        &ctx.join("bench.py"),
        "import mod\nprint(mod.work(1000000))\n",
    );
    write(
        &ctx.join("Dockerfile"),
        "FROM harness-base:bookworm\n\
         COPY mod.py test_mod.py bench.py /testbed/\n\
         COPY fast.py /tmp/fast.py\n\
         RUN cd /testbed && git init -q && git add -A \
         && git -c user.name=u -c user.email=u@x commit -qm base && git branch -M main \
         && cp /tmp/fast.py mod.py && git -c user.name=u -c user.email=u@x commit -qam fix \
         && git branch fix && git checkout -q main~0 && git reset -q --hard HEAD~1 \
         && git checkout -q --detach && rm /tmp/fast.py\n\
         COPY refuse_root.so /usr/local/lib/refuse_root.so\n\
         RUN echo /usr/local/lib/refuse_root.so > /etc/ld.so.preload\n",
    );
    let built = run(Command::new("docker")
        .args(["build", "-q", "-t", PREBUILT])
        .arg(&ctx));
    assert_eq!(built.status.code(), Some(0), "docker build {PREBUILT}");
    let sha = Command::new("docker")
        .args(["run", "--rm", "--network", "none", PREBUILT])
        .args(["git", "-C", "/testbed", "rev-parse", "fix"])
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&sha.stdout).trim().to_string();
    assert_eq!(sha.len(), 40, "{sha}");
    sha
}

/// Polls the containers of `run_id` until `child` ends, probing each new one as root.
fn probe_while(
    run_id: &str,
    child: &mut std::process::Child,
) -> BTreeMap<String, serde_json::Value> {
    let mut seen: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    loop {
        let done = child.try_wait().unwrap().is_some();
        let list = Command::new("docker")
            .args([
                "ps",
                "--filter",
                "label=org.harness.managed=true",
                "--filter",
                &format!("label=org.harness.run={run_id}"),
                "--format",
                "{{.ID}} {{.Label \"org.harness.variant\"}}",
            ])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&list.stdout).lines() {
            let (id, variant) = line.split_once(' ').unwrap_or((line, "?"));
            if seen.contains_key(variant) {
                continue;
            }
            let probe = Command::new("docker")
                .args([
                    "exec",
                    "-u",
                    "0",
                    id,
                    "/opt/harness/bin/harness-supervisor",
                    "probe",
                ])
                .output()
                .unwrap();
            let Ok(mut report) = serde_json::from_slice::<serde_json::Value>(&probe.stdout) else {
                continue; // gone between the listing and the exec
            };
            let inspect = Command::new("docker")
                .args(["inspect", "--format", "{{json .HostConfig}}", id])
                .output()
                .unwrap();
            if let Ok(hc) = serde_json::from_slice::<serde_json::Value>(&inspect.stdout) {
                report["host_config"] = hc;
            }
            seen.insert(variant.to_string(), report);
        }
        if done {
            return seen;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn assert_default_boundary(kind: &str, r: &serde_json::Value) {
    assert_eq!(r["uid"], 0, "{kind}: {r}");
    for cap in r["cap_bounding"].as_array().unwrap() {
        let cap = cap.as_str().unwrap();
        assert!(
            DOCKER_DEFAULT.contains(&cap),
            "{kind}: root holds {cap}: {r}"
        );
    }
    assert!(
        r["cgroup_mount"].as_str().unwrap().starts_with("refused"),
        "{kind}: {r}"
    );
    assert_eq!(r["seccomp"], "2", "{kind}: {r}");
    assert_eq!(r["no_new_privs"], "1", "{kind}: {r}");
    assert_eq!(
        r["sandbox"], "ok",
        "{kind}: a run's sandbox is still made: {r}"
    );
    let hc = &r["host_config"];
    assert_eq!(hc["Privileged"], false, "{kind}: {hc}");
    let opts: Vec<&str> = hc["SecurityOpt"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        !opts.iter().any(|o| o.contains("unconfined")),
        "{kind}: {opts:?}"
    );
    assert!(
        opts.iter().any(|o| o.starts_with("seccomp=")),
        "{kind}: {opts:?}"
    );
    for cap in hc["CapAdd"].as_array().into_iter().flatten() {
        let cap = cap.as_str().unwrap().trim_start_matches("CAP_");
        assert!(DOCKER_DEFAULT.contains(&cap), "{kind}: adds {cap}");
    }
}

#[test]
fn every_kind_of_container_keeps_dockers_default_boundary() {
    if !docker_available("every_kind_of_container_keeps") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    // The image build records what its steps ran with.
    make_task(
        &ds,
        "kinds",
        SLOW,
        FAST,
        "[image]\nsetup = [\"grep -E '^(CapBnd|Seccomp|NoNewPrivs):' /proc/self/status > /opt/build-status.txt; mkdir -p /tmp/cg && (mount -t cgroup -o memory cg /tmp/cg 2>/dev/null && echo cgroup-mounted || echo cgroup-refused) >> /opt/build-status.txt\"]\n",
    );
    let toml = ds.join("kinds/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    // A bench that takes a moment, so its containers are there to be looked at.
    write(
        &toml,
        &text.replace(
            "command = \"python3 bench.py\"",
            "command = \"python3 -c 'import time, mod; time.sleep(0.4); print(mod.work(1000))'\"",
        ),
    );
    let preds = tmp.path().join("preds.jsonl");
    predictions(&preds, &[("kinds", Some(&diff("mod.py", SLOW, FAST)))]);
    let out = tmp.path().join("out");
    let mut child = harness()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "kinds",
            "-q",
        ])
        .args(["--replicas", "2", "--min-rounds", "2", "--max-rounds", "2"])
        .arg("--predictions")
        .arg(&preds)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out)
        .spawn()
        .unwrap();
    let seen = probe_while("kinds", &mut child);
    assert!(child.wait().unwrap().success());
    for kind in ["base", "human", "s0"] {
        let r = seen
            .get(kind)
            .unwrap_or_else(|| panic!("no {kind} container seen: {:?}", seen.keys()));
        assert_default_boundary(kind, r);
    }
    let replica = seen
        .iter()
        .find(|(k, _)| k.contains("/r"))
        .unwrap_or_else(|| panic!("no replica container seen: {:?}", seen.keys()));
    assert_default_boundary(replica.0, replica.1);

    // An agent's container (with a network, as an agent that calls an API has).
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        "[agent.sleeper]\ncommand = \"sleep 6; echo done\"\nnetwork = true\ntime_limit = 60\n",
    );
    let mut child = harness()
        .args(["agent", "run", "--agent", "sleeper"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out)
        .spawn()
        .unwrap();
    let seen = probe_while("agent-sleeper", &mut child);
    child.wait().unwrap();
    let agent = seen
        .values()
        .next()
        .unwrap_or_else(|| panic!("no agent container seen"));
    assert_default_boundary("agent", agent);

    // The image build's steps ran under Docker's default build settings.
    let image = task_image("kinds");
    let built = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "/bin/cat",
        ])
        .arg(&image)
        .arg("/opt/build-status.txt")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&built.stdout);
    assert!(status.contains("cgroup-refused"), "{status}");
    let bnd = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(
        bnd & (1 << 21),
        0,
        "SYS_ADMIN in the build's bounding set: {status}"
    );
    assert!(containers_of_run("kinds").is_empty());
    assert!(containers_of_run("agent-sleeper").is_empty());
}
