//! A real browser for the report pages: Debian's headless Chromium renders a page from its
//! file, and gives back the DOM after the page's script ran, every console message, and
//! every network request the page made (from Chromium's own network log: requests whose
//! network isolation key is the file origin, i.e. made on the page's behalf, apart from the
//! browser's own background traffic).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Chromium's path, or None (a skip with a reason) when it is missing and CI is not set;
/// under CI a missing browser is a failure (`.ci/run` installs it).
pub fn chromium(test: &str) -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("which").arg(name).output()
            && out.status.success()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: CI is set and no chromium is installed (.ci/run installs Debian's)");
    }
    eprintln!(
        "skipping {test}: no chromium (apt-get install chromium; set CI=1 to make this a failure)"
    );
    None
}

/// What the browser saw of a page.
pub struct Rendered {
    pub dom: String,
    pub console: Vec<String>,
    pub page_requests: Vec<String>,
    pub seconds: f64,
}

fn base_command(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

fn url(page: &Path, fragment: &str) -> String {
    let abs = std::fs::canonicalize(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    format!("file://{}{fragment}", abs.display())
}

/// Loads the page and returns its DOM after load, its console and its requests.
pub fn render(browser: &Path, page: &Path) -> Rendered {
    let tmp = tempfile::tempdir().unwrap();
    let netlog = tmp.path().join("net.json");
    let started = std::time::Instant::now();
    let out = base_command(browser, &tmp.path().join("profile"))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(url(page, ""))
        .output()
        .expect("run chromium");
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect();
    Rendered {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
        page_requests: page_requests(&netlog),
        seconds,
    }
}

/// Loads a page from a server (`http://...`) and returns its DOM after its script ran and
/// the console's lines.
pub fn render_url(browser: &Path, url: &str) -> (String, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let out = base_command(browser, &tmp.path().join("profile"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// URLs the page asked the network for, from Chromium's network log.
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).unwrap_or_default();
    // Chromium may leave the log's closing brackets off when it exits quickly.
    let log: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .unwrap_or_else(|e| panic!("unreadable network log: {e}"));
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    let mut urls = Vec::new();
    for e in log["events"].as_array().into_iter().flatten() {
        if e["type"] != start_job {
            continue;
        }
        let p = &e["params"];
        let url = p["url"].as_str().unwrap_or_default();
        let key = p["network_isolation_key"].as_str().unwrap_or_default();
        if key.starts_with("file://") && !url.starts_with("file:") {
            urls.push(url.to_string());
        }
    }
    urls
}

/// A PNG of the page at `width` x `height` (the fragment opens a drill-down: `#s.ID.0`).
pub fn screenshot(
    browser: &Path,
    page: &Path,
    fragment: &str,
    out: &Path,
    width: u32,
    height: u32,
) {
    let tmp = tempfile::tempdir().unwrap();
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let status = base_command(browser, &tmp.path().join("profile"))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", out.display()))
        .arg(url(page, fragment))
        .output()
        .expect("run chromium");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let png = std::fs::read(out).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG: {}", out.display());
}

/// The number of times `needle` occurs in `hay`.
pub fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Runs `script` in the page at `width` px after the page's own script, and returns what it
/// left in `document.body`'s `data-probe` attribute (JSON). The page is copied beside itself
/// (its relative links still resolve) and the copy removed.
pub fn probe(browser: &Path, page: &Path, width: u32, script: &str) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let copy = page.with_file_name("probe.report.html");
    std::fs::write(
        &copy,
        html.replace("</body>", &format!("<script>{script}</script></body>")),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = base_command(browser, &tmp.path().join("profile"))
        .arg(format!("--window-size={width},900"))
        .arg("--dump-dom")
        .arg(url(&copy, ""))
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_file(&copy);
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("data-probe=\"").unwrap_or_else(|| {
        panic!(
            "the probe did not run: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    }) + "data-probe=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}
