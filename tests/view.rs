//! `harness view` serving a results folder that holds a run from elsewhere (issue 40): a
//! hostile run's page, rendered by headless Chromium, cannot read another run's run.json or
//! patch.diff, while the same page served by a plain server in the same browser does (so
//! the test can see a leak), and each guard of the policy stops the read on its own; the
//! harness's own pages still run their script. A peer is
//! answered by its socket address: real connections from this machine's outward address.

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{browser, harness, run};

/// A server, stopped when dropped.
struct Served {
    child: Child,
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` and reads the port of the first `http://` address it prints.
fn serve(mut command: Command) -> Served {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut served = Served { child, port: 0 };
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let host = address.split('/').next().unwrap();
    served.port = host.rsplit(':').next().unwrap().parse().unwrap();
    served
}

/// Python's file server on `dir`, sending `policy` as the Content-Security-Policy of every
/// response when given.
fn plain_server(dir: &Path, policy: Option<&str>) -> Served {
    const SERVER: &str = "import http.server, sys\n\
        class H(http.server.SimpleHTTPRequestHandler):\n\
        \x20   def end_headers(self):\n\
        \x20       if len(sys.argv) > 2: self.send_header('Content-Security-Policy', sys.argv[2])\n\
        \x20       super().end_headers()\n\
        \x20   def log_message(self, *a): pass\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), \
        lambda *a: H(*a, directory=sys.argv[1]))\n\
        print('serving at http://127.0.0.1:%d/' % s.server_address[1], flush=True)\n\
        s.serve_forever()\n";
    let mut c = Command::new("python3");
    c.args(["-c", SERVER]).arg(dir).args(policy);
    serve(c)
}

fn harness_view(results: &Path, extra: &[&str]) -> Served {
    let mut c = harness();
    c.arg("view")
        .arg("--results-dir")
        .arg(results)
        .args(["--serve", "--port", "0"])
        .args(extra)
        .env_remove("BROWSER")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    serve(c)
}

const SECRET: &str = "SECRET-PATCH-7f3a9c";

/// A page that reads another run's files with synchronous requests and writes what it got
/// into the page (`--dump-dom` shows it).
const HOSTILE: &str = r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>hostile</title></head>
<body><pre id="stolen">the script did not run</pre><script>
var out = ['origin ' + String(self.origin)];
['/victim/run.json', '/victim/ci-model/alpha/0/patch.diff'].forEach(function (u) {
  try {
    var x = new XMLHttpRequest(); x.open('GET', u, false); x.send();
    out.push(u + ' -> ' + x.status + ' ' + x.responseText);
  } catch (e) { out.push(u + ' -> refused: ' + e.name); }
});
document.getElementById('stolen').textContent = out.join('\n');
</script></body></html>
"#;

/// `<results>/victim`: a run with its report written by the harness and a patch holding
/// [`SECRET`]; `<results>/hostile`: a run whose report.html is [`HOSTILE`].
fn results_with_a_hostile_run(results: &Path) {
    let victim = crate::ci_status::write_run(&results.join("victim"));
    std::fs::write(
        victim.sample_dir("ci-model", "alpha", 0).join("patch.diff"),
        format!("diff --git a/x b/x\n+{SECRET}\n"),
    )
    .unwrap();
    let out = run(harness().arg("report").arg(&victim.root));
    assert_eq!(out.status.code(), Some(0));
    let hostile = crate::ci_status::write_run(&results.join("hostile"));
    std::fs::write(hostile.root.join("report.html"), HOSTILE).unwrap();
}

#[test]
fn a_hostile_run_page_cannot_read_another_runs_files() {
    let Some(chrome) = browser::chromium("view_hostile_page") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    results_with_a_hostile_run(&results);

    // Served by a plain server (no policy), the page reads the other run: the attack is
    // real in this browser.
    let url = |port: u16, path: &str| format!("http://127.0.0.1:{port}/{path}");
    let plain = plain_server(&results, None);
    let (dom, _) = browser::render_url(&chrome, &url(plain.port, "hostile/report.html"));
    assert!(
        dom.contains(SECRET) && dom.contains("dataset_digest"),
        "the control read nothing: {dom}"
    );
    drop(plain);

    // Where a script does run (the harness's own pages run theirs), each of the policy's
    // two other guards stops the read by itself: the sandbox (an opaque origin) and
    // `default-src 'none'` (no request at all).
    let policy = harness::app::view::policy();
    for guard in ["sandbox", "default-src"] {
        let directive = policy
            .split(';')
            .map(str::trim)
            .find(|d| d.starts_with(guard))
            .unwrap_or_else(|| panic!("{guard} in {policy}"));
        let only = format!("{directive}; script-src 'unsafe-inline'");
        let server = plain_server(&results, Some(&only));
        let (dom, _) = browser::render_url(&chrome, &url(server.port, "hostile/report.html"));
        assert!(dom.contains("refused: NetworkError"), "{only}: {dom}");
        assert!(
            !dom.contains(SECRET) && !dom.contains("dataset_digest"),
            "{only}: {dom}"
        );
    }

    // Served by harness view: nothing of the other run reaches the page.
    let view = harness_view(&results, &[]);
    let (dom, console) = browser::render_url(&chrome, &url(view.port, "hostile/report.html"));
    assert!(
        dom.contains("id=\"stolen\""),
        "the page was rendered: {dom}"
    );
    assert!(
        !dom.contains(SECRET) && !dom.contains("dataset_digest"),
        "the hostile page read another run: {dom}"
    );
    assert!(
        dom.contains("the script did not run"),
        "a script the harness did not write ran: {dom}"
    );
    assert!(
        console
            .iter()
            .any(|l| l.contains("Content Security Policy")),
        "{console:?}"
    );

    // The harness's own pages still run their script (it makes the tables sortable).
    for page in ["index.html", "victim/report.html"] {
        let (dom, console) = browser::render_url(&chrome, &url(view.port, page));
        assert!(
            dom.contains("tabindex=\"0\""),
            "{page}: the page's script did not run"
        );
        assert!(
            !console
                .iter()
                .any(|l| l.contains("Content Security Policy")),
            "{page}: {console:?}"
        );
    }
}

/// This machine's address toward the outside (no packet is sent), when it has one.
fn outward_ip() -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A GET from `from` (a source address of this machine) to `to`, naming `host`.
fn ask(from: IpAddr, to: SocketAddr, host: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        let mut s = socket.connect(to).await.unwrap();
        let request = format!("GET /victim/run.json HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    })
}

#[test]
fn a_peer_is_answered_by_its_address_not_by_the_host_it_names() {
    let Some(lan) = outward_ip() else {
        if std::env::var_os("CI").is_some() {
            panic!("view_peers: CI is set and this machine has no outward address");
        }
        eprintln!("skipping view_peers: this machine has no outward IPv4 address");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    crate::ci_status::write_run(&results.join("victim"));
    let here: IpAddr = "127.0.0.1".parse().unwrap();
    let served = |answer: &str| answer.starts_with("HTTP/1.1 200") && answer.contains("\"run_id\"");

    // Bound to loopback (the default): this machine only, whatever Host a peer sends.
    let view = harness_view(&results, &[]);
    let to = SocketAddr::new(here, view.port);
    let host = format!("127.0.0.1:{}", view.port);
    let answer = ask(here, to, &host);
    assert!(served(&answer), "{answer}");
    assert!(
        answer.contains("Content-Security-Policy: sandbox"),
        "{answer}"
    );
    let answer = ask(lan, to, &host);
    assert!(
        answer.starts_with("HTTP/1.1 403"),
        "a peer from {lan}: {answer}"
    );
    assert!(!answer.contains("\"run_id\""), "{answer}");
    drop(view);

    // Bound to every address (remote viewing asked for): a peer elsewhere naming
    // 127.0.0.1 is refused (the issue's finding); one naming the address it reached is
    // served, as is this machine by a loopback name.
    let view = harness_view(&results, &["--bind", "0.0.0.0"]);
    let to_lan = SocketAddr::new(lan, view.port);
    let answer = ask(lan, to_lan, &format!("127.0.0.1:{}", view.port));
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");
    assert!(!answer.contains("\"run_id\""), "{answer}");
    let answer = ask(lan, to_lan, &format!("{lan}:{}", view.port));
    assert!(served(&answer), "{answer}");
    let answer = ask(
        here,
        SocketAddr::new(here, view.port),
        &format!("localhost:{}", view.port),
    );
    assert!(served(&answer), "{answer}");
}
