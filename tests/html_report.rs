//! The HTML pages in a real browser (headless Chromium): a run's `report.html` and a
//! `harness compare --html` page over two real runs render with no console message and no
//! network request; their rows and numbers are the JSON's; whatever a model name, a patch
//! or a test log holds is shown as text, never run. (The shipped examples' page is checked
//! in tests/examples.rs, on the run that test makes.)

use crate::common::browser;
use crate::common::*;

/// The network-request and console detectors see what they must: a page that loads an
/// image over HTTP and throws is caught (so an empty list below means something).
#[test]
fn the_browser_checks_catch_a_request_and_an_error() {
    let Some(chrome) = browser::chromium("browser_checks") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("bad.html");
    write(
        &page,
        "<html><body><img src=\"http://127.0.0.1:9/x.png\"><script>undefinedFn();</script></body></html>",
    );
    let r = browser::render(&chrome, &page);
    assert_eq!(
        r.page_requests,
        vec!["http://127.0.0.1:9/x.png".to_string()]
    );
    assert!(
        r.console.iter().any(|l| l.contains("undefinedFn")),
        "{:?}",
        r.console
    );
}

const HOSTILE: &str =
    "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";

fn rows(model: &str, patches: &[&str]) -> String {
    patches
        .iter()
        .map(|p| {
            serde_json::json!({"instance_id": "cmp", "model_name_or_path": model, "model_patch": p})
                .to_string()
                + "\n"
        })
        .collect()
}

fn opt_at_k(
    ds: &std::path::Path,
    preds: &std::path::Path,
    out: &std::path::Path,
    model: &str,
    run_id: &str,
    k: &str,
) {
    let res = run(harness()
        .args([
            "opt-at-k", "--model", model, "--k", k, "--run-id", run_id, "--json",
        ])
        .args(["--replicas", "1", "--min-rounds", "5", "--max-rounds", "5"])
        .arg("--predictions")
        .arg(preds)
        .arg("--dataset")
        .arg(ds)
        .arg("--results-dir")
        .arg(out));
    assert_eq!(res.status.code(), Some(0));
}

#[test]
fn run_and_compare_pages_render_with_the_json_numbers_and_nothing_hostile_runs() {
    if !docker_available("html_pages") {
        return;
    }
    let Some(chrome) = browser::chromium("html_pages") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "cmp", SLOW, FAST, "");
    write(
        &ds.join("cmp/repo/bench.py"),
        "import mod\nprint(mod.work(1500000))\n",
    );
    let medium = "def work(n):\n    total = 0\n    for i in range(n // 3):\n        total += sum([i * i])\n    return (n - 1) * n * (2 * n - 1) // 6\n";
    let loud = format!("def work(n):\n    raise ValueError({HOSTILE:?})\n");
    let beta = format!("beta{HOSTILE}");
    write(
        &tmp.path().join("alpha.jsonl"),
        &rows("alpha", &[&diff("mod.py", SLOW, FAST)]),
    );
    write(
        &tmp.path().join("beta.jsonl"),
        &rows(
            &beta,
            &[&diff("mod.py", SLOW, medium), &diff("mod.py", SLOW, &loud)],
        ),
    );
    let out = tmp.path().join("out");
    opt_at_k(
        &ds,
        &tmp.path().join("alpha.jsonl"),
        &out,
        "alpha",
        "alpha",
        "1",
    );
    opt_at_k(
        &ds,
        &tmp.path().join("beta.jsonl"),
        &out,
        &beta,
        "beta",
        "2",
    );

    // The run page of the model with the hostile name and the hostile test log.
    let page = out.join("beta/report.html");
    let r = browser::render(&chrome, &page);
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    assert!(r.page_requests.is_empty(), "{:?}", r.page_requests);
    assert_eq!(
        browser::count(&r.dom, "<script"),
        1,
        "only the page's own script"
    );
    assert_eq!(browser::count(&r.dom, "<img"), 0);
    assert!(!r.dom.contains("<title>pwned"));
    assert!(
        r.dom.contains("beta&lt;script&gt;document.title="),
        "the name shown as text"
    );
    let failed = read_json(
        &out.join("beta")
            .join(model_dir(&beta))
            .join("cmp/1/report.json"),
    );
    assert_eq!(failed["status"], "test_failed", "{failed}");
    assert!(
        failed["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("<script>"),
        "{failed}"
    );
    assert!(
        r.dom
            .contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;")
            || r.dom
                .contains("&lt;script&gt;document.title=&#39;pwned&#39;"),
        "the log shown as text"
    );
    let s0 = read_json(
        &out.join("beta")
            .join(model_dir(&beta))
            .join("cmp/0/report.json"),
    );
    let gm = s0["opt_stats"]["gm_speedup_patch_base"].as_f64().unwrap();
    let iv = &s0["intervals"]["gm_speedup_patch_base"];
    let text = format!(
        "{gm:.2}x [{:.2}, {:.2}]",
        iv["lo"].as_f64().unwrap(),
        iv["hi"].as_f64().unwrap()
    );
    assert!(r.dom.contains(&format!("data-estimate=\"{gm}\"")), "{gm}");
    assert!(r.dom.contains(&text), "{text}");
    assert_eq!(browser::count(&r.dom, "data-sample=\""), 2);
    assert!(
        r.dom.contains("aria-sort") || r.dom.contains("class=\"sortable\""),
        "the script ran"
    );

    // The comparison: alpha (human's code) against beta (a third of the loop).
    let html = tmp.path().join("compare.html");
    let res = run(harness()
        .arg("compare")
        .arg(out.join("alpha"))
        .arg(out.join("beta"))
        .arg("--json")
        .arg("--html")
        .arg(&html));
    assert_eq!(res.status.code(), Some(0));
    let c: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let pair = &c["tasks"][0]["pairs"][0];
    assert_eq!(pair["winner"], "first", "{c:#}");
    let ratio = &pair["ratio"];
    assert!(ratio["lo"].as_f64().unwrap() > 1.0, "{ratio}");
    assert_eq!(c["contenders"][0]["rank"]["rank"], 1);
    assert_eq!(c["contenders"][1]["label"], beta.as_str());
    let r = browser::render(&chrome, &html);
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    assert!(r.page_requests.is_empty(), "{:?}", r.page_requests);
    assert_eq!(browser::count(&r.dom, "<script"), 1);
    let text = format!(
        "{:.2}x [{:.2}, {:.2}]",
        ratio["estimate"].as_f64().unwrap(),
        ratio["lo"].as_f64().unwrap(),
        ratio["hi"].as_f64().unwrap()
    );
    assert!(r.dom.contains(&text), "{text}");
    assert_eq!(browser::count(&r.dom, "data-instance=\"cmp\""), 1);
    browser::screenshot(
        &chrome,
        &html,
        "",
        &repo_root().join("target/report-screenshots/compare.png"),
        1280,
        1100,
    );

    // -q: the summary, not the list of files written.
    let res = run(harness().args(["-q", "report"]).arg(out.join("alpha")));
    assert_eq!(res.status.code(), Some(0));
    let said = String::from_utf8_lossy(&res.stdout);
    assert!(said.contains("Opt@") && !said.contains("wrote "), "{said}");

    // A copy of a run (the same model, id, folder name and start) is still told apart.
    let copy = tmp.path().join("copy/out/alpha");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(out.join("alpha"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let res = run(harness()
        .arg("compare")
        .arg(out.join("alpha"))
        .arg(&copy)
        .arg("--json"));
    assert_eq!(res.status.code(), Some(0));
    let c: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    let (first, second) = (&c["contenders"][0]["label"], &c["contenders"][1]["label"]);
    assert_ne!(first, second);
    assert!(
        [first, second]
            .iter()
            .any(|l| l.as_str().unwrap_or("").contains("copy/out/alpha")),
        "{first} {second}"
    );

    // Runs judged under different criteria are not ranked against each other unless asked.
    let res = run(harness()
        .arg("report")
        .arg(out.join("beta"))
        .args(["--criterion", "gso"]));
    assert_eq!(res.status.code(), Some(0));
    let res = run(harness()
        .arg("compare")
        .arg(out.join("alpha"))
        .arg(out.join("beta")));
    assert_ne!(res.status.code(), Some(0));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("criterion differs") && err.contains("--allow-mixed"),
        "{err}"
    );
    let res = run(harness()
        .arg("compare")
        .arg(out.join("alpha"))
        .arg(out.join("beta"))
        .arg("--allow-mixed"));
    assert_eq!(res.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&res.stdout).contains("compared although criterion differs"));
}

/// The folder of a model's samples (its name made safe for paths).
fn model_dir(model: &str) -> String {
    harness::store::run_folder::model_slug(model)
}
