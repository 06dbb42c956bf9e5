//! harness-supervisor: the harness's static program inside task containers, and the only
//! program root runs in them once they run.
//!
//!   harness-supervisor warden SCRIPT [ARG...]
//!       runs one of the harness's Python programs as the warden, an unprivileged user,
//!       with the interpreter pinned at image build, and does for it what needs root (see
//!       broker.rs)
//!   harness-supervisor run [--persist] [--uid N --gid N] [--cwd DIR] [--fsize BYTES]
//!       [--layer-size BYTES] [--staging DIR] [--ready-fd FD --go-fd FD] [--result-fd FD]
//!       [--keep-fd FD]... [--remove PATH]... [--copy-out PATH=FD]... [--copy-limit BYTES]
//!       [--warm] [--layer DIR]... [--report-writes] [--stop-when-full]
//!       [--after '[UID,GID,FD,"argv",...]']
//!       -- COMMAND...
//!       runs COMMAND as the sandbox user in a sandbox made for this run alone (see run.rs);
//!       with --persist, in the container as it is, its writes kept
//!   harness-supervisor idle       the container's main process: waits to be stopped
//!   harness-supervisor true       exits 0 (a program of the harness's own)
//!   harness-supervisor probe      what this container lets root do, as JSON (see probe.rs)
//!   harness-supervisor oom-kills  how many processes the kernel's OOM killer took here
//!
//! It is linked statically: it loads nothing from the image, so it runs on any image and no
//! file of the image (which the code under test may have written) can change what it does.

mod broker;
mod fsops;
mod layers;
mod mounts;
mod probe;
mod python;
mod relay;
mod run;
mod seal;
mod seccomp;
mod sys;

fn usage() -> i32 {
    eprintln!(
        "usage: harness-supervisor warden SCRIPT [ARG...]\n       \
         harness-supervisor run [OPTIONS] -- COMMAND...\n       \
         harness-supervisor relay PORT SOCKET\n       \
         harness-supervisor idle | true | probe | oom-kills"
    );
    2
}

fn number<T: std::str::FromStr>(key: &str, value: Option<&String>) -> Result<T, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{key} needs a number"))
}

/// `--after '[UID, GID, OUT_FD, "program", "arg", ...]'`.
fn parse_after(text: &str) -> Result<run::After, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("--after: {e}"))?;
    let a = v.as_array().ok_or("--after: not a JSON list")?;
    let n = |i: usize| {
        a.get(i)
            .and_then(|x| x.as_i64())
            .ok_or("--after: uid, gid, fd first")
    };
    let argv: Vec<String> = a
        .iter()
        .skip(3)
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect();
    if argv.is_empty() {
        return Err("--after: no program".into());
    }
    Ok(run::After {
        uid: n(0)? as u32,
        gid: n(1)? as u32,
        out_fd: n(2)? as i32,
        argv,
    })
}

pub(crate) fn parse_run(args: &[String]) -> Result<run::Options, String> {
    let split = args
        .iter()
        .position(|a| a == "--")
        .ok_or("run: no `--` before the command")?;
    let mut o = run::Options {
        persist: false,
        report_writes: false,
        stop_when_full: false,
        uid: 10001,
        gid: 10001,
        cwd: "/testbed".into(),
        fsize: 0,
        layer_size: 1 << 30,
        staging: run::STAGING.into(),
        ready_fd: None,
        go_fd: None,
        result_fd: None,
        keep_fds: Vec::new(),
        copy_out: Vec::new(),
        copy_limit: 64 << 20,
        remove: Vec::new(),
        warm: false,
        layers: Vec::new(),
        env: None,
        after: None,
        argv: args[split + 1..].to_vec(),
    };
    if o.argv.is_empty() {
        return Err("run: no command after `--`".into());
    }
    let mut i = 0;
    while i < split {
        let key = args[i].as_str();
        let value = args.get(i + 1).filter(|_| i + 1 < split);
        let mut takes = true;
        match key {
            "--persist" => {
                o.persist = true;
                takes = false;
            }
            "--report-writes" => {
                o.report_writes = true;
                takes = false;
            }
            "--stop-when-full" => {
                o.stop_when_full = true;
                takes = false;
            }
            "--warm" => {
                o.warm = true;
                takes = false;
            }
            "--uid" => o.uid = number(key, value)?,
            "--gid" => o.gid = number(key, value)?,
            "--fsize" => o.fsize = number(key, value)?,
            "--layer-size" => o.layer_size = number(key, value)?,
            "--copy-limit" => o.copy_limit = number(key, value)?,
            "--ready-fd" => o.ready_fd = Some(number(key, value)?),
            "--go-fd" => o.go_fd = Some(number(key, value)?),
            "--result-fd" => o.result_fd = Some(number(key, value)?),
            "--keep-fd" => o.keep_fds.push(number(key, value)?),
            "--cwd" => o.cwd = value.ok_or("--cwd needs a folder")?.clone(),
            "--staging" => o.staging = value.ok_or("--staging needs a folder")?.clone(),
            "--remove" => o.remove.push(value.ok_or("--remove needs a path")?.clone()),
            "--layer" => o
                .layers
                .push(value.ok_or("--layer needs a folder")?.clone()),
            "--after" => {
                let text = value.ok_or("--after needs a JSON list: uid, gid, fd, argv...")?;
                o.after = Some(parse_after(text)?);
            }
            "--copy-out" => {
                let v = value.ok_or("--copy-out needs PATH=FD")?;
                let (path, fd) = v.rsplit_once('=').ok_or("--copy-out needs PATH=FD")?;
                o.copy_out.push((
                    path.to_string(),
                    number("--copy-out", Some(&fd.to_string()))?,
                ));
            }
            other => return Err(format!("run: unknown option {other}")),
        }
        i += if takes { 2 } else { 1 };
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("warden") if args.len() >= 2 => broker::main(python::RECORD, &args[1], &args[2..]),
        Some("run") => match parse_run(&args[1..]) {
            Ok(opts) => run::main(&opts),
            Err(e) => {
                eprintln!("harness-supervisor: {e}");
                2
            }
        },
        Some("idle") => match seal::own_path() {
            Err(e) => {
                eprintln!("harness-supervisor: {e}");
                1
            }
            Ok(()) => loop {
                // SAFETY: waits for a signal; the container's init stops this process.
                unsafe { libc::pause() };
            },
        },
        Some("relay") => relay::main(&args[1..]),
        Some("true") => 0,
        Some("probe") => {
            println!("{}", probe::report());
            0
        }
        Some("oom-kills") => match probe::oom_kills() {
            Some(n) => {
                println!("{n}");
                0
            }
            None => 1,
        },
        _ => usage(),
    };
    std::process::exit(code);
}
