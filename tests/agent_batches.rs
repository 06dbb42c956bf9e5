//! `harness agent run` resumes by sample and retries only what failed for an API reason
//! (LoCoDiff's rule): a scripted 429 takes one sample's request; that sample gets no row and
//! the next run retries it alone, its row adding up both attempts; a sample whose model gave
//! a bad outcome keeps its row and is never run again. And a batch of agent x model entries:
//! the agent runs with each model, then each entry is evaluated and ranked with its cost.

use std::path::Path;

use crate::common::*;
use crate::real_agents::{requests, scripted_model_failing};

/// A minimal agent with a provider: one request to its model through the gateway, the
/// tool call it gets run in the tree; sample 2 then fails as a model's bad outcome would
/// (exit 3, nothing changed). `change-first` edits the tree before asking; `binary` writes
/// a binary file after the answer.
const ASKER: &str = r##"import json, os, subprocess, sys, urllib.request, urllib.error
mode = sys.argv[1] if len(sys.argv) > 1 else "ask"
if mode == "change-first":
    open("mod.py", "a").write("# tried\n")
body = {"model": os.environ["HARNESS_AGENT_MODEL"], "max_tokens": 64,
        "messages": [{"role": "user", "content": "speed it up"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]}
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps(body).encode(), method="POST",
    headers={"content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
             "anthropic-version": "2023-06-01"})
try:
    answer = json.load(urllib.request.urlopen(req, timeout=60))
except urllib.error.HTTPError as e:
    print("API error", e.code)
    sys.exit(1)
if mode == "binary":
    open("blob.bin", "wb").write(bytes(range(256)))
    sys.exit(0)
if os.environ["HARNESS_SAMPLE"] == "2":
    print("the model's answer did not help")
    sys.exit(3)
for c in answer["content"]:
    if c.get("type") == "tool_use":
        subprocess.run(c["input"]["command"], shell=True, check=True)
"##;

fn agents_file(dir: &Path) -> std::path::PathBuf {
    agents_file_priced(dir, "")
}

/// The asker's agents file, with `more` price tables.
fn agents_file_priced(dir: &Path, more: &str) -> std::path::PathBuf {
    write(&dir.join("asker.py"), ASKER);
    let p = dir.join("agents.toml");
    write(
        &p,
        &format!(
            "[agent.asker]\nscript = \"asker.py\"\ncommand = \"python3 /opt/agent/run\"\n\
         provider = \"anthropic\"\nkey = \"ANTHROPIC_API_KEY\"\nmodel = \"claude-sonnet-4-5\"\n\
         time_limit = 120\n\n[agent.changer]\nscript = \"asker.py\"\n\
         command = \"python3 /opt/agent/run change-first\"\nprovider = \"anthropic\"\n\
         key = \"ANTHROPIC_API_KEY\"\nmodel = \"claude-sonnet-4-5\"\n\n[agent.binary]\n\
         script = \"asker.py\"\ncommand = \"python3 /opt/agent/run binary\"\n\
         provider = \"anthropic\"\nkey = \"ANTHROPIC_API_KEY\"\nmodel = \"claude-sonnet-4-5\"\n\n\
         [price.\"claude-sonnet-4-5\"]\ninput = 3.0\noutput = 15.0\n{more}"
        ),
    );
    p
}

#[test]
fn a_rerun_after_a_scripted_429_retries_only_that_sample() {
    if !docker_available("agent_retry") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "retry-task", SLOW, FAST, "");
    let agents = agents_file(tmp.path());
    let server = scripted_model_failing(
        &tmp.path().join("model"),
        &["echo '# faster' >> mod.py"],
        &[429],
    );
    let out = tmp.path().join("out");
    let agent_run = || {
        let o = run(harness()
            .args(["agent", "run", "--agent", "asker", "--samples", "3"])
            .arg("--agents")
            .arg(&agents)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out)
            .args([
                "--model-server",
                &format!("http://127.0.0.1:{}", server.port),
            ])
            .env("ANTHROPIC_API_KEY", "sk-ant-retry-test-key"));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let rows = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(out.join("agents/asker.predictions.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (code, text) = agent_run();
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("1 sample(s) failed for an API reason") && text.contains("retry-task/0"),
        "{text}"
    );
    assert!(
        text.contains("429"),
        "the provider's failure is named: {text}"
    );
    let first = rows();
    let samples: Vec<u64> = first
        .iter()
        .map(|r| r["sample"].as_u64().unwrap())
        .collect();
    assert_eq!(samples, [1, 2], "the 429'd sample has no row: {first:?}");
    assert_eq!(
        first[1]["model_patch"], "",
        "the model's bad outcome is a row"
    );
    assert_eq!(requests(&server.log).len(), 3);

    let (code, text) = agent_run();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("2 kept from earlier runs"), "{text}");
    assert_eq!(
        requests(&server.log).len(),
        4,
        "only the 429'd sample ran again"
    );
    let second = rows();
    assert_eq!(second.len(), 3);
    assert_eq!(second[1], first[0], "kept rows are kept as they were");
    assert_eq!(second[2], first[1]);
    let retried = &second[0];
    assert_eq!(retried["sample"], 0);
    assert!(
        retried["model_patch"]
            .as_str()
            .unwrap()
            .contains("# faster"),
        "{retried}"
    );
    let usage = &retried["agent_usage"];
    assert_eq!(
        (&usage["retries"], &usage["requests"], &usage["api_errors"]),
        (&1.into(), &2.into(), &1.into()),
        "both attempts are counted: {usage}"
    );
    // 1200 in, 300 out and 900 cached at the input price: (1200 x 3 + 300 x 15 + 900 x 3) / 1e6
    let dollars = usage["cost_usd"].as_f64().unwrap();
    assert!((dollars - 0.0108).abs() < 1e-9, "{usage}");
    let (code, text) = agent_run();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        requests(&server.log).len(),
        4,
        "nothing left to run: {text}"
    );

    // A budget for the whole run: $0.0108 a sample, $0.02 in all; the second sample starts
    // with what is left (its one answer crosses it), the third does not start.
    let o = run(harness()
        .args(["agent", "run", "--agent", "asker", "--samples", "3"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(tmp.path().join("budget"))
        .args(["--max-run-cost", "0.02", "--model-server"])
        .arg(format!("http://127.0.0.1:{}", server.port))
        .env("ANTHROPIC_API_KEY", "sk-ant-retry-test-key"));
    let text = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("retry-task/2: not run: the run's budget of $0.02 is spent"),
        "{text}"
    );
    assert_eq!(requests(&server.log).len(), 6, "{text}");
}

#[test]
fn a_batch_runs_one_agent_with_two_models_and_ranks_them_by_cost_too() {
    if !docker_available("agent_batch") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    make_task(&tmp.path().join("ds"), "batch-task", SLOW, FAST, "");
    agents_file_priced(
        tmp.path(),
        "\n[price.\"claude-haiku-4-5\"]\ninput = 1.0\noutput = 5.0\n",
    );
    let server = scripted_model_failing(
        &tmp.path().join("model"),
        &["echo '# faster' >> mod.py"],
        &[],
    );
    let o = run(harness()
        .args(["agent", "models", "--model-server"])
        .arg(format!("http://127.0.0.1:{}", server.port)));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "scripted\n", "{o:?}");
    let config = tmp.path().join("batch.toml");
    write(
        &config,
        &format!(
            "name = \"agents-x-models\"\ndataset = \"ds\"\nk = 1\nagents = \"agents.toml\"\n\
             model_server = \"http://127.0.0.1:{}\"\nmin_rounds = 3\nmax_rounds = 3\n\n\
             [[entry]]\nagent = \"asker\"\nmodel = \"claude-sonnet-4-5\"\n\n\
             [[entry]]\nagent = \"asker\"\nmodel = \"claude-haiku-4-5\"\n",
            server.port
        ),
    );
    let out = tmp.path().join("out");
    let batch = || {
        let o = run(harness()
            .arg("run")
            .arg(&config)
            .arg("--results-dir")
            .arg(&out)
            .env("ANTHROPIC_API_KEY", "sk-ant-batch-test-key"));
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{text}");
        text
    };
    let text = batch();
    assert_eq!(
        requests(&server.log).len(),
        2,
        "one sample per model: {text}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("agents-x-models/batch.json")).unwrap(),
    )
    .unwrap();
    let cost = |model: &str| {
        report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["model"] == format!("asker/{model}"))
            .map(|e| e["figures"]["agents"]["cost_usd"].as_f64().unwrap())
            .unwrap()
    };
    // (1200 x in + 300 x out + 900 cached x in) / 1e6 at each model's prices.
    assert!(
        (cost("claude-sonnet-4-5") - 0.0108).abs() < 1e-9,
        "{report}"
    );
    assert!((cost("claude-haiku-4-5") - 0.0036).abs() < 1e-9, "{report}");
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("cheapest: asker/claude-haiku-4-5 ($0.0036)"),
        "{notes}"
    );
    assert!(
        notes.contains("fastest: ") && notes.contains("most efficient: "),
        "{notes}"
    );
    let summary = std::fs::read_to_string(out.join("agents-x-models/summary.md")).unwrap();
    assert!(
        summary.contains("| cost |") && summary.contains("$0.0108"),
        "{summary}"
    );
    // Run again: the agents' rows are kept and nothing is asked of the model again.
    batch();
    assert_eq!(requests(&server.log).len(), 2);
}

#[test]
fn an_agent_cannot_trade_its_outcome_for_a_new_draw() {
    if !docker_available("agent_redraw") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "redraw-task", SLOW, FAST, "");
    let agents = agents_file(tmp.path());
    let server = scripted_model_failing(
        &tmp.path().join("model"),
        &["echo '# faster' >> mod.py"],
        &[429, 429, 429, 429],
    );
    let out = tmp.path().join("out");
    let agent_run = |agent: &str| {
        let o = run(harness()
            .args(["agent", "run", "--agent", agent])
            .arg("--agents")
            .arg(&agents)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out)
            .args([
                "--model-server",
                &format!("http://127.0.0.1:{}", server.port),
            ])
            .env("ANTHROPIC_API_KEY", "sk-ant-redraw-test-key"));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let row = |agent: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(out.join(format!("agents/{agent}.predictions.jsonl")))
            .unwrap_or_default();
        text.lines()
            .next()
            .map(|l| serde_json::from_str(l).unwrap())
            .unwrap_or_default()
    };
    // A 429 after a change: the change is the sample (never a new draw).
    let text = agent_run("changer");
    let changed = row("changer");
    assert!(
        changed["model_patch"]
            .as_str()
            .unwrap_or("")
            .contains("# tried"),
        "{text}"
    );
    // The same failure with no change is retried, at most twice: the third is the sample.
    for _ in 0..2 {
        let text = agent_run("asker");
        assert!(text.contains("failed for an API reason"), "{text}");
        assert!(row("asker").is_null(), "{text}");
    }
    let text = agent_run("asker");
    assert!(text.contains("after 3 attempts"), "{text}");
    let gave_up = row("asker");
    assert_eq!(gave_up["model_patch"], "", "{gave_up}");
    assert_eq!(gave_up["agent_usage"]["retries"], 2, "{gave_up}");
    assert_eq!(gave_up["agent_usage"]["requests"], 3, "{gave_up}");
    // A patch the harness refuses (a binary file) is the agent's outcome, its cost kept.
    let text = agent_run("binary");
    assert!(text.contains("binary"), "{text}");
    let binary = row("binary");
    assert_eq!(binary["model_patch"], "", "{text}");
    assert_eq!(binary["agent_usage"]["requests"], 1, "{binary}");
    assert!(binary["agent_usage"]["cost_usd"].as_f64().unwrap() > 0.0);
    let asked = requests(&server.log).len();
    agent_run("binary");
    agent_run("changer");
    assert_eq!(requests(&server.log).len(), asked, "nothing is drawn again");
}
