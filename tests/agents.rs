//! Agents run by the harness, end to end with the scripted stand-in
//! (`scripts/standin_agent.sh`): `agent run` → predictions → `opt-at-k`; `local` by commit
//! prefix with `--patch`, `--predictions` and `--agent`; and the secret the agent is given
//! stays out of every image, log, report and predictions file.

use std::path::{Path, PathBuf};

use crate::common::*;

const SECRET: &str = "test-secret-7f3a9c1e";

/// An agents.toml naming the stand-in, with its script beside it (an agents file names
/// files in its own folder only).
fn agents_toml(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::copy(
        repo_root().join("scripts/standin_agent.sh"),
        dir.join("scripts/standin_agent.sh"),
    )
    .unwrap();
    let p = dir.join("agents.toml");
    write(
        &p,
        "[agent.standin]\nscript = \"scripts/standin_agent.sh\"\ncommand = \"/opt/agent/run\"\nenv = [\"ANTHROPIC_API_KEY\"]\ntime_limit = 120\n",
    );
    p
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p)
                && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            {
                hits.push(p);
            }
        }
    }
    hits
}

#[test]
fn agent_run_feeds_opt_at_k_and_its_secret_is_nowhere() {
    if !docker_available("agent_run_feeds_opt_at_k") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "agent-task", SLOW, FAST, "");
    let agents = agents_toml(tmp.path());
    let out = tmp.path().join("out");
    let agent_run = |env: Option<&str>| {
        let mut cmd = harness();
        cmd.args(["agent", "run", "--agent", "standin"])
            .args(["--pass-env", "ANTHROPIC_API_KEY"])
            .arg("--agents")
            .arg(&agents)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out)
            .env_remove("ANTHROPIC_API_KEY");
        if let Some(v) = env {
            cmd.env("ANTHROPIC_API_KEY", v);
        }
        run(&mut cmd)
    };
    // Without the key: a clear error naming it, nothing run.
    let o = agent_run(None);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ANTHROPIC_API_KEY"));

    let o = agent_run(Some(SECRET));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let preds = out.join("agents/standin.predictions.jsonl");
    let text = std::fs::read_to_string(&preds).unwrap();
    let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(row["instance_id"], "agent-task");
    assert_eq!(row["model_name_or_path"], "standin");
    assert!(
        row["model_patch"]
            .as_str()
            .unwrap()
            .contains("+    return (n - 1) * n * (2 * n - 1) // 6"),
        "{row}"
    );
    let log = std::fs::read_to_string(out.join("agents/standin/agent-task/0.log")).unwrap();
    assert!(
        log.contains("key ***"),
        "the agent used the key, redacted: {log}"
    );

    // The predictions file evaluates end to end.
    let o = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "standin",
            "--k",
            "1",
            "--run-id",
            "agent-e2e",
            "--replicas",
            "2",
            "--min-rounds",
            "5",
            "--max-rounds",
            "6",
        ])
        .arg("--predictions")
        .arg(&preds)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rep = read_json(&out.join("agent-e2e/standin/agent-task/0/report.json"));
    assert_eq!(rep["status"], "passed", "{rep}");
    assert_eq!(
        rep["shared_with"], "human",
        "the agent wrote the human's code: {rep}"
    );

    // The secret is in no file the harness wrote, and in no layer or config of the image.
    assert!(
        files_containing(&out, SECRET).is_empty(),
        "{:?}",
        files_containing(&out, SECRET)
    );
    let image = rep["image"].as_str().unwrap();
    for args in [
        vec!["history", "--no-trunc", image],
        vec!["image", "inspect", image],
    ] {
        let o = std::process::Command::new("docker")
            .args(&args)
            .output()
            .unwrap();
        assert!(o.status.success());
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains(SECRET),
            "docker {args:?}"
        );
    }
    assert!(containers_of_run("agent-standin").is_empty());
}

fn local(args: &[&str], extra: &[(&str, &Path)], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = harness();
    cmd.arg("local")
        .args(args)
        .args(["--replicas", "2", "--min-rounds", "5", "--max-rounds", "5"])
        .env_remove("ANTHROPIC_API_KEY");
    for (flag, path) in extra {
        cmd.arg(flag).arg(path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd)
}

/// The prefix of a task's human commit, from `harness tasks`.
fn human_commit(dataset: &Path, id: &str) -> String {
    let o = run(harness().arg("tasks").arg("--dataset").arg(dataset));
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .unwrap_or_else(|| panic!("{id} not listed: {text}"));
    line.split_whitespace().nth(2).unwrap()[..10].to_string()
}

#[test]
fn local_on_a_shipped_example_by_commit_prefix_three_ways() {
    if !docker_available("local_on_a_shipped_example") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("out");
    let examples = repo_root().join("tasks");
    let prefix = human_commit(&examples, "dedupe-list");
    let human_patch = repo_root().join("tasks/dedupe-list/human.patch");
    let table = |o: &std::process::Output| {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(text.contains("task dedupe-list"), "{text}");
        assert!(text.contains("speedup over base"), "{text}");
        assert!(text.contains("patch vs human:"), "{text}");
        text
    };
    // --patch: the human's own patch matches the human.
    let o = local(
        &["--commit", &prefix],
        &[
            ("--patch", &human_patch),
            ("--dataset", &examples),
            ("--results-dir", &results),
        ],
        &[],
    );
    let text = table(&o);
    assert!(text.contains("matches human"), "{text}");
    assert!(
        results
            .join(format!("local-{}", prefix.to_lowercase()))
            .join("local/run.json")
            .is_file()
    );

    // --agent of the stand-in, with no saved patch: it runs, then is judged.
    let agents = agents_toml(tmp.path());
    let o = local(
        &[
            "--commit",
            &prefix,
            "--agent",
            "standin",
            "--pass-env",
            "ANTHROPIC_API_KEY",
        ],
        &[
            ("--agents", &agents),
            ("--dataset", &examples),
            ("--results-dir", &results),
        ],
        &[("ANTHROPIC_API_KEY", SECRET)],
    );
    let text = table(&o);
    assert!(text.contains("patch of standin"), "{text}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("running the agent now"));

    // --predictions with the agent's rows.
    let preds = tmp.path().join("p.jsonl");
    write(
        &preds,
        &(serde_json::json!({"instance_id": "dedupe-list", "model_name_or_path": "someone",
            "model_patch": std::fs::read_to_string(&human_patch).unwrap()})
        .to_string()
            + "\n"),
    );
    let o = local(
        &["--commit", &prefix, "--agent", "someone"],
        &[
            ("--predictions", &preds),
            ("--dataset", &examples),
            ("--results-dir", &results),
        ],
        &[],
    );
    table(&o);
    assert!(files_containing(&results, SECRET).is_empty());
}

#[test]
fn unknown_and_ambiguous_prefixes_are_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    // Same content, so the same reproducible commits: any prefix of them is ambiguous.
    make_task(&ds, "twin-a", SLOW, FAST, "");
    make_task(&ds, "twin-b", SLOW, FAST, "");
    let patch = tmp.path().join("x.patch");
    write(&patch, "");
    let prefix = human_commit(&ds, "twin-a");
    let o = local(
        &["--commit", &prefix],
        &[("--patch", &patch), ("--dataset", &ds)],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is ambiguous"), "{err}");
    assert!(err.contains("twin-a") && err.contains("twin-b"), "{err}");
    let o = local(
        &["--commit", "ffffffff"],
        &[("--patch", &patch), ("--dataset", &ds)],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no task in") && err.contains("starting with ffffffff"),
        "{err}"
    );
    assert!(err.contains("twin-a: base "), "lists the commits: {err}");
    let o = local(
        &["--commit", "xyz"],
        &[("--patch", &patch), ("--dataset", &ds)],
        &[],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("4 or more hex digits"));
}

/// An agents file is data from outside (issue 40): a `script` that leads out of its folder
/// (by `..`, an absolute path or a link) is refused naming the file, the agent and the key,
/// and a variable it asks for reaches no container unless the user passes it with
/// `--pass-env`, even when this environment has it. Both stop the command before any
/// container or file of the run.
#[test]
fn an_agents_file_names_only_its_own_files_and_the_users_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "agent-task", SLOW, FAST, "");
    let host_file = tmp.path().join("host-secret.txt");
    write(&host_file, "HOST-FILE-MARKER\n");
    let cfg = tmp.path().join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    std::os::unix::fs::symlink("../host-secret.txt", cfg.join("link.sh")).unwrap();
    let out = tmp.path().join("out");
    let agent_run = |toml: &str, name: &str, extra: &[&str]| {
        let agents = cfg.join("agents.toml");
        write(&agents, toml);
        run(harness()
            .args(["agent", "run", "--agent", name])
            .args(extra)
            .arg("--agents")
            .arg(&agents)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out)
            .env_remove("HARNESS_PASS_ENV")
            .env("HARNESS_TEST_AGENT_TOKEN", SECRET))
    };
    let agents_file = cfg.join("agents.toml").display().to_string();
    for (script, why) in [
        ("../host-secret.txt".to_string(), "outside"),
        (host_file.display().to_string(), "absolute path"),
        ("link.sh".to_string(), "outside"),
    ] {
        let toml = format!("[agent.thief]\nscript = {script:?}\ncommand = \"/opt/agent/run\"\n");
        let o = agent_run(&toml, "thief", &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{script}: {stderr}");
        assert!(
            stderr.contains(&format!("{agents_file}: agent.thief.script: "))
                && stderr.contains(why),
            "{script}: {stderr}"
        );
    }
    let asker = "[agent.asker]\ncommand = \"echo $HARNESS_TEST_AGENT_TOKEN\"\nenv = [\"HARNESS_TEST_AGENT_TOKEN\"]\n";
    let o = agent_run(asker, "asker", &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("agent asker asks for HARNESS_TEST_AGENT_TOKEN")
            && stderr.contains("add `--pass-env HARNESS_TEST_AGENT_TOKEN`"),
        "the error says which flag to add: {stderr}"
    );
    // Passing another variable is not passing this one.
    let o = agent_run(asker, "asker", &["--pass-env", "SOME_OTHER_NAME"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pass-env HARNESS_TEST_AGENT_TOKEN"));
    assert!(!out.exists(), "nothing of a run was written");
}

/// Agents that attack the harness: one plants a file-system monitor in `.git/config` for
/// root's `git add` to run; one writes its key into the tree base64-encoded and split into
/// pieces. Neither reaches root, and no form of the key reaches a saved patch or log.
#[test]
fn an_agent_cannot_run_code_as_root_or_smuggle_its_key_out() {
    if !docker_available("an_agent_cannot_run_code_as_root") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "agent-task", SLOW, FAST, "");
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        "[agent.monitor]\n\
         command = \"\"\"\n\
         printf 'def work(n):\\n    return (n - 1) * n * (2 * n - 1) // 6\\n' > mod.py\n\
         git config core.fsmonitor 'id -u > /testbed/pwned-by-uid-$(id -u); false' 2>/dev/null \
         || printf '[core]\\n\\tfsmonitor = id -u > /testbed/pwned-by-fsmonitor\\n' >> .git/config 2>/dev/null || true\n\
         \"\"\"\n\
         time_limit = 60\n\
         [agent.leaky]\n\
         command = \"\"\"\n\
         printf 'def work(n):\\n    return (n - 1) * n * (2 * n - 1) // 6\\n' > mod.py\n\
         printf '%s' \"$ANTHROPIC_API_KEY\" | base64 > note.txt\n\
         printf 'K = \"%s\" \\\\\\n    \"%s\"\\n' $(printf '%s' \"$ANTHROPIC_API_KEY\" | cut -c1-9) $(printf '%s' \"$ANTHROPIC_API_KEY\" | cut -c10-) > key.py\n\
         echo \"my key, encoded: $(printf '%s' \"$ANTHROPIC_API_KEY\" | od -An -tx1 | tr -d ' \\n')\"\n\
         \"\"\"\n\
         env = [\"ANTHROPIC_API_KEY\"]\n\
         time_limit = 60\n",
    );
    let out = tmp.path().join("out");
    let agent_run = |name: &str| {
        run(harness()
            .args(["agent", "run", "--agent", name])
            .args(["--pass-env", "ANTHROPIC_API_KEY"])
            .arg("--agents")
            .arg(&agents)
            .arg("--dataset")
            .arg(&ds)
            .arg("--results-dir")
            .arg(&out)
            .env("ANTHROPIC_API_KEY", SECRET))
    };

    let o = agent_run("monitor");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let preds = std::fs::read_to_string(out.join("agents/monitor.predictions.jsonl")).unwrap();
    assert!(
        preds.contains("(n - 1) * n"),
        "the agent's change is its patch: {preds}"
    );
    assert!(
        !preds.contains("pwned"),
        "the agent's file-system monitor ran during the diff: {preds}"
    );

    let o = agent_run("leaky");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("ANTHROPIC_API_KEY") && stderr.contains("not saved"),
        "the patch holding the key is refused: {stderr}"
    );
    let b64 = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' {SECRET} | base64"))
        .output()
        .unwrap();
    let b64 = String::from_utf8_lossy(&b64.stdout).trim().to_string();
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    for form in [SECRET, b64.as_str(), hex.as_str(), &SECRET[9..]] {
        assert!(
            files_containing(&out, form).is_empty(),
            "{form:?} in {:?}",
            files_containing(&out, form)
        );
    }
    assert!(containers_of_run("agent-leaky").is_empty());
    assert!(containers_of_run("agent-monitor").is_empty());
}

/// Every `n`-character run of the letters and digits of `s`.
fn alnum_fragments(s: &str, n: usize) -> Vec<String> {
    let alnum: Vec<char> = s.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    alnum.windows(n).map(|w| w.iter().collect()).collect()
}

/// Whether `text`, read with everything but letters and digits left out, holds a run of 8
/// characters of `secret`'s letters and digits.
fn holds_a_piece_of(text: &str, secret: &str) -> bool {
    let squeezed: String = text.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    alnum_fragments(secret, 8)
        .iter()
        .any(|f| squeezed.contains(f.as_str()))
}

/// Issue 28: an agent that prints its key in halves on two lines (and in pieces of four
/// characters, one a line, indented), and writes it into a file that also holds a NUL byte
/// (which `git diff --binary` would carry in git's compressed encoding, where no form of the
/// key shows, and `git apply` would give it back). No half of the key is in the log, no patch
/// is saved that gives the key back when applied.
#[test]
fn an_agents_key_leaves_neither_in_halves_nor_in_a_binary_patch() {
    if !docker_available("an_agents_key_leaves_neither_in_halves") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "agent-task", SLOW, FAST, "");
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        r#"[agent.halves]
command = '''
printf 'def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n' > mod.py
k="$ANTHROPIC_API_KEY"
echo "first half: $(printf '%s' "$k" | cut -c1-10)"
echo "second half: $(printf '%s' "$k" | cut -c11-)"
printf '%s\n' "$k" | fold -w4 | sed 's/^/    | /'
printf 'blob\000%s\n' "$k" > data.bin
'''
env = ["ANTHROPIC_API_KEY"]
time_limit = 60
"#,
    );
    let out = tmp.path().join("out");
    let o = run(harness()
        .args(["agent", "run", "--agent", "halves"])
        .args(["--pass-env", "ANTHROPIC_API_KEY"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out)
        .env("ANTHROPIC_API_KEY", SECRET));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("binary") && stderr.contains("data.bin"),
        "the binary change is refused, named: {stderr}"
    );
    // Every saved patch, applied to base, gives no form of the key back.
    let preds = out.join("agents/halves.predictions.jsonl");
    let text = std::fs::read_to_string(&preds).unwrap_or_default();
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let patch = row["model_patch"].as_str().unwrap_or("");
        if patch.is_empty() {
            // The refused patch's sample: an empty patch, nothing to apply.
            continue;
        }
        let tree = tmp.path().join("applied");
        let _ = std::fs::remove_dir_all(&tree);
        let sh = |cmd: &str| {
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(&tree)
                .output()
                .unwrap();
            assert!(o.status.success(), "{cmd}: {o:?}");
        };
        std::fs::create_dir_all(&tree).unwrap();
        sh(&format!(
            "cp -a {}/. . && git init -q . && git add -A",
            ds.join("agent-task/repo").display()
        ));
        write(&tmp.path().join("saved.patch"), patch);
        sh(&format!(
            "git apply --binary {}",
            tmp.path().join("saved.patch").display()
        ));
        assert!(
            files_containing(&tree, SECRET).is_empty(),
            "git apply of the saved patch gives the key back: {:?}",
            files_containing(&tree, SECRET)
        );
    }
    assert!(
        !holds_a_piece_of(&text, SECRET),
        "a piece of the key is in the predictions: {text}"
    );
    let log = std::fs::read_to_string(out.join("agents/halves/agent-task/0.log")).unwrap();
    assert!(log.contains("first half:"), "{log}");
    for half in [&SECRET[..10], &SECRET[10..]] {
        assert!(
            !log.contains(half),
            "half {half:?} of the key in the log: {log}"
        );
    }
    assert!(
        !holds_a_piece_of(&log, SECRET),
        "pieces of the key, joined across lines, in the log: {log}"
    );
    assert!(containers_of_run("agent-halves").is_empty());
}

/// Issues 28 and 40: an agent is held to the task's disk limit, at the limit. This one writes
/// 120 MB into the tree and its home under a limit of 40 MB, then would sleep: its writes
/// stop at the limit (they go to layers of exactly that size) and it is stopped there (not
/// at its time limit), its run gives an empty patch and is reported, and the harness goes on.
#[test]
fn an_agent_writing_past_the_disk_limit_is_stopped() {
    if !docker_available("an_agent_writing_past_the_disk_limit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "agent-task", SLOW, FAST, "");
    let toml = ds.join("agent-task/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    write(
        &toml,
        &text.replace("pids = 128\n", "pids = 128\ndisk = \"40m\"\n"),
    );
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        r#"[agent.filler]
command = '''
printf 'def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n' > mod.py
mkdir -p junk "$HOME/cache"
for i in 1 2 3 4 5 6; do
  head -c 10000000 /dev/urandom > junk/f$i
  head -c 10000000 /dev/urandom > "$HOME/cache/f$i"
done
echo "landed $(cat junk/* "$HOME"/cache/* | wc -c) bytes"
sleep 90
'''
time_limit = 120
"#,
    );
    let out = tmp.path().join("out");
    let started = std::time::Instant::now();
    let o = run(harness()
        .args(["agent", "run", "--agent", "filler"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "no patch: agent-task/0: stopped: it reached the task's disk limit of 40 MiB"
        ),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(80),
        "stopped at the limit, not after its sleep: {:?}",
        started.elapsed()
    );
    let preds = std::fs::read_to_string(out.join("agents/filler.predictions.jsonl")).unwrap();
    let row: serde_json::Value = serde_json::from_str(preds.lines().next().unwrap()).unwrap();
    assert_eq!(row["model_patch"], "", "{row}");
    let log = std::fs::read_to_string(out.join("agents/filler/agent-task/0.log")).unwrap();
    assert!(log.contains("disk limit"), "{log}");
    // Each write fails at the limit at once, so the loop may end before the stop comes: what
    // landed is then printed, and it is within the limit.
    if let Some(landed) = log
        .lines()
        .find_map(|l| l.strip_prefix("landed ")?.strip_suffix(" bytes"))
    {
        let landed: u64 = landed.trim().parse().unwrap();
        assert!(
            landed <= 40 << 20,
            "{landed} bytes landed past 40 MiB: {log}"
        );
    }
    assert!(containers_of_run("agent-filler").is_empty());
}

/// Issue 28: what an agent must not see. A task on a prebuilt image (as GSO's are) whose
/// `.git` holds the human's fix as a later commit (on a branch and a tag), with a hidden test
/// in `[image] files` and base's reference result written by its setup, readable by all in
/// the image. The agent looks for each (every object of the store, the reference folder, the
/// hidden test, the prompt): none is in its container, and its repository still works.
#[test]
fn an_agent_sees_no_hidden_test_reference_result_or_later_commit() {
    if !docker_available("an_agent_sees_no_hidden_test") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = "harness-test-agent-view:1";
    let ctx = tmp.path().join("image");
    write(
        &ctx.join("Dockerfile"),
        "FROM harness-base:bookworm\n\
         RUN mkdir /testbed && cd /testbed && git init -q \
         && printf 'def work(n):\\n    return sum(i * i for i in range(n))\\n' > mod.py \
         && git add -A && git -c user.name=u -c user.email=u@x commit -qm 'the base commit' \
         && git branch -M main \
         && printf 'def work(n):\\n    return (n - 1) * n * (2 * n - 1) // 6\\n' > mod.py \
         && git -c user.name=u -c user.email=u@x commit -qam 'FUTURE-FIX-MARKER: closed form' \
         && git tag v-fix && git checkout -q HEAD~1 && chmod -R 777 /testbed\n",
    );
    let o = run(std::process::Command::new("docker")
        .args(["build", "-q", "-t", image])
        .arg(&ctx));
    assert_eq!(o.status.code(), Some(0), "docker build {image}");
    let ds = tmp.path().join("ds");
    let dir = ds.join("view-task");
    write(
        &dir.join("hidden_test.py"),
        "# HIDDEN-TEST-MARKER\nimport sys\nsys.path.insert(0, '/testbed')\nimport mod\nprint(mod.work(10))\n",
    );
    write(&dir.join("human.patch"), &diff("mod.py", SLOW, FAST));
    write(
        &dir.join("task.toml"),
        &format!(
            "description = \"Make work faster\"\n\
             [source]\nimage = \"{image}\"\n\
             [human]\npatch = \"human.patch\"\n\
             [image]\nsetup = [\"mkdir -p /opt/gso-reference && echo REFERENCE-MARKER-42 > /opt/gso-reference/gso_0_result.json && chmod -R a-w,a+rX /opt/gso-reference\"]\n\
             [image.files]\n\"/gso_test_0.py\" = \"hidden_test.py\"\n\
             [test]\ncommand = \"python3 /gso_test_0.py --file_prefix /opt/gso-reference/gso_0\"\ntimeout = 60\n\
             [[bench]]\nname = \"work\"\ncommand = \"python3 /gso_test_0.py --file_prefix /opt/gso-reference/gso_0\"\nruns = 2\ntimeout = 30\n\
             [resources]\ncpus = 1\nmemory = \"256m\"\n"
        ),
    );
    let agents = tmp.path().join("agents.toml");
    write(
        &agents,
        r#"[agent.peeker]
command = '''
{
  echo "== test"; cat /gso_test_0.py; ls -la /
  echo "== reference"; ls -la /opt /opt/gso-reference; cat /opt/gso-reference/*
  echo "== git"; git log --all --format='%H %s'; git rev-list --all --reflog
  git cat-file --batch-all-objects --batch-check='%(objectname) %(objecttype)' \
    | awk '$2 != "tree" {print $1}' | git cat-file --batch
  git fsck --unreachable --no-reflogs 2>&1
  echo "== prompt"; cat "$HARNESS_TASK_FILE"
} > seen.txt 2>&1
cat seen.txt
echo "prompt-names-hidden: $(grep -c -e gso_test -e gso-reference "$HARNESS_TASK_FILE")"
git status --short >/dev/null && echo "git-status-ok"
echo "base-history: $(git log --format=%s HEAD | head -n 3 | tr '\n' '|')"
printf 'def work(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n' > mod.py
'''
time_limit = 120
"#,
    );
    let out = tmp.path().join("out");
    let o = run(harness()
        .args(["agent", "run", "--agent", "peeker"])
        .arg("--agents")
        .arg(&agents)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&out));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let log = std::fs::read_to_string(out.join("agents/peeker/view-task/0.log")).unwrap();
    let preds = std::fs::read_to_string(out.join("agents/peeker.predictions.jsonl")).unwrap();
    for marker in [
        "HIDDEN-TEST-MARKER",
        "REFERENCE-MARKER-42",
        "FUTURE-FIX-MARKER",
    ] {
        assert!(!log.contains(marker), "{marker} seen by the agent: {log}");
        assert!(!preds.contains(marker), "{marker} in the patch: {preds}");
    }
    assert!(log.contains("prompt-names-hidden: 0"), "{log}");
    assert!(log.contains("git-status-ok"), "{log}");
    assert!(
        log.contains("base-history: harness-base|the base commit|"),
        "the history up to base is the agent's: {log}"
    );
    assert!(
        preds.contains("+    return (n - 1) * n * (2 * n - 1) // 6"),
        "{preds}"
    );
    assert!(containers_of_run("agent-peeker").is_empty());
}
