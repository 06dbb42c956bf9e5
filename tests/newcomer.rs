//! A newcomer's first hour, as the README tells it: the set-up command, `harness doctor`, the
//! main command, the page it points at (rendered in headless Chromium, with the run's date),
//! `harness view` serving it, `harness status` listing the run. The commands are taken from
//! the README's own code blocks, so a README that drifts from the program fails here.

use std::io::{BufRead, Read, Write};
use std::path::Path;

use crate::common::*;

/// The README's `sh` code block that holds `needle`, as one command line.
fn readme_command(needle: &str) -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut blocks = readme
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or(""));
    let block = blocks
        .find(|b| b.contains(needle))
        .unwrap_or_else(|| panic!("the README has no sh block with {needle:?}"));
    let command = block.trim().to_string();
    assert_eq!(command.lines().count(), 1, "one command: {command}");
    command
}

/// A shell in the repository as a newcomer's: its own home and install prefix, the
/// toolchain where it is.
fn shell(home: &Path, prefix: &Path, command: &str) -> std::process::Command {
    let real_home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let mut c = std::process::Command::new("bash");
    c.arg("-c").arg(command).current_dir(repo_root());
    c.env("HOME", home)
        .env("PREFIX", prefix)
        .env(
            "PATH",
            format!(
                "{}/bin:{}",
                prefix.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env(
            "CARGO_HOME",
            std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo")),
        )
        .env(
            "RUSTUP_HOME",
            std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup")),
        )
        // The debug build `cargo test` made: no second (release) build in the tests.
        .env("HARNESS_SETUP_PROFILE", "debug")
        .env("CARGO_TARGET_DIR", repo_root().join("target"))
        .env_remove("BROWSER")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    c
}

/// The first line a long-running command prints, and the command, stopped when dropped (so
/// a server is asked while it lives).
struct Served {
    child: std::process::Child,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn first_line_then_stop(mut command: std::process::Command) -> (String, Served) {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (line, Served { child })
}

#[test]
fn a_newcomer_follows_the_readme_from_set_up_to_the_page() {
    if !docker_available("newcomer") {
        return;
    }
    let Some(chrome) = browser::chromium("newcomer") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (home, prefix) = (tmp.path().join("home"), tmp.path().join("prefix"));
    std::fs::create_dir_all(&home).unwrap();

    // Set up: harness on PATH, completions, manual pages, then the doctor.
    let out = run(&mut shell(
        &home,
        &prefix,
        &readme_command("scripts/setup.sh"),
    ));
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(prefix.join("bin/harness").is_file());
    assert!(
        said.contains("docker daemon") && said.contains("base image"),
        "{said}"
    );
    for f in [
        ".local/share/bash-completion/completions/harness",
        ".local/share/zsh/site-functions/_harness",
        ".config/fish/completions/harness.fish",
        ".local/share/man/man1/harness.1",
        ".local/share/man/man1/harness-opt-at-k.1",
    ] {
        assert!(home.join(f).is_file(), "{f}");
    }

    // The main command, into this test's results folder.
    let results = tmp.path().join("results");
    let main = format!(
        "{} --results-dir {}",
        readme_command("harness opt-at-k"),
        results.display()
    );
    assert!(main.starts_with("harness "), "{main}");
    let out = run(&mut shell(&home, &prefix, &main));
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stdout);
    let headline = said.lines().find(|l| l.starts_with("Opt@3 ")).unwrap_or("");
    assert!(
        headline.contains(" · pass@1 ") && headline.contains(" · wall "),
        "{said}"
    );
    let page = said
        .lines()
        .find_map(|l| l.strip_prefix("page: "))
        .unwrap_or_else(|| panic!("no page line: {said}"));
    let page = std::path::PathBuf::from(page);
    assert!(page.is_file(), "{}", page.display());
    assert_eq!(
        said.lines().last(),
        Some(format!("page: {}", page.display()).as_str())
    );
    let info = read_json(&page.parent().unwrap().join("run.json"));
    let day = info["started_at"].as_str().unwrap()[..10].to_string();
    let r = browser::render(&chrome, &page);
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    assert!(
        r.dom.contains("id=\"run-when\"") && r.dom.contains(&format!("Started {day}")),
        "the page says when the run was"
    );

    // harness view, where no browser can be opened: it serves the page and says where.
    let (line, _served) = first_line_then_stop(shell(
        &home,
        &prefix,
        &format!(
            "exec harness view {} --port 0",
            page.parent().unwrap().display()
        ),
    ));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address: {line}"));
    let host_port = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = std::net::TcpStream::connect(host_port).unwrap();
    write!(
        stream,
        "GET /report.html HTTP/1.1\r\nHost: {host_port}\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("id=\"run-when\""));

    // With no folder named, the index of every run, linking to the run's page.
    let (line, _index) = first_line_then_stop(shell(
        &home,
        &prefix,
        &format!(
            "exec harness view --results-dir {} --port 0",
            results.display()
        ),
    ));
    assert!(line.contains("/index.html"), "{line}");
    let index = std::fs::read_to_string(results.join("index.html")).unwrap();
    assert!(
        index.contains("href=\"demo-agent-k3/report.html\""),
        "the index links the run's page"
    );

    // harness status: the run, one line.
    let out = run(&mut shell(
        &home,
        &prefix,
        &format!("harness status --results-dir {}", results.display()),
    ));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.lines()
            .any(|l| l.contains("demo-agent-k3") && l.contains("complete")),
        "{said}"
    );
}

/// The book's link check fails on a broken link (and passes on the built book in CI).
#[test]
fn the_book_link_check_finds_a_broken_link() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("index.html"),
        "<a id=\"top\" href=\"page.html#there\">x</a><a href=\"#top\">y</a>",
    );
    write(&tmp.path().join("page.html"), "<h2 id=\"there\">z</h2>");
    let check = |dir: &Path| {
        std::process::Command::new("python3")
            .arg(repo_root().join("scripts/check_book_links.py"))
            .arg(dir)
            .output()
            .unwrap()
    };
    assert_eq!(check(tmp.path()).status.code(), Some(0));
    write(&tmp.path().join("page.html"), "<h2 id=\"elsewhere\">z</h2>");
    let out = check(tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("index.html: page.html#there (no #there there)")
    );
}
