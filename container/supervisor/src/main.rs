//! harness-supervisor: the harness's static program inside task containers.
//!
//!   harness-supervisor python SCRIPT [ARG...]
//!       runs one of the harness's Python programs as root with the interpreter pinned at
//!       image build (see python.rs), never one found on the image's PATH
//!   harness-supervisor run [--as-root] [--uid N --gid N] [--cwd DIR] [--fsize BYTES]
//!       [--layer-size BYTES] [--staging DIR] [--ready-fd FD --go-fd FD] [--result-fd FD]
//!       [--keep-fd FD]... [--remove PATH]... [--copy-out PATH=FD]... [--copy-limit BYTES]
//!       [--warm]
//!       -- COMMAND...
//!       runs COMMAND in a sandbox made for this run alone (see run.rs)
//!
//! It is linked statically: it loads nothing from the image, so it runs on any image and no
//! file of the image (which the code under test may have written) can change what it does.

mod mounts;
mod python;
mod run;
mod sys;

fn usage() -> i32 {
    eprintln!(
        "usage: harness-supervisor python SCRIPT [ARG...]\n       \
         harness-supervisor run [OPTIONS] -- COMMAND..."
    );
    2
}

fn number<T: std::str::FromStr>(key: &str, value: Option<&String>) -> Result<T, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{key} needs a number"))
}

fn parse_run(args: &[String]) -> Result<run::Options, String> {
    let split = args
        .iter()
        .position(|a| a == "--")
        .ok_or("run: no `--` before the command")?;
    let mut o = run::Options {
        as_root: false,
        uid: 10001,
        gid: 10001,
        cwd: "/testbed".into(),
        fsize: 0,
        layer_size: 1 << 30,
        staging: "/opt/harness/layers".into(),
        ready_fd: None,
        go_fd: None,
        result_fd: None,
        keep_fds: Vec::new(),
        copy_out: Vec::new(),
        copy_limit: 64 << 20,
        remove: Vec::new(),
        warm: false,
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
            "--as-root" => {
                o.as_root = true;
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
        Some("python") if args.len() >= 2 => {
            let why = python::exec(python::RECORD, &args[1], &args[2..]);
            eprintln!("harness-supervisor: {why}");
            125
        }
        Some("run") => match parse_run(&args[1..]) {
            Ok(opts) => run::main(&opts),
            Err(e) => {
                eprintln!("harness-supervisor: {e}");
                2
            }
        },
        _ => usage(),
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn run_options_parse_and_bad_ones_are_named() {
        let o = parse_run(&strings(&[
            "--uid",
            "5",
            "--warm",
            "--copy-out",
            "out=a.txt=7",
            "--keep-fd",
            "5",
            "--",
            "python3",
            "-c",
            "pass",
        ]))
        .unwrap();
        assert_eq!((o.uid, o.warm), (5, true));
        assert_eq!(o.copy_out, vec![("out=a.txt".to_string(), 7)]);
        assert_eq!(o.keep_fds, vec![5]);
        assert_eq!(o.argv, strings(&["python3", "-c", "pass"]));
        assert!(
            parse_run(&strings(&["--uid", "x", "--", "true"]))
                .unwrap_err()
                .contains("--uid")
        );
        assert!(
            parse_run(&strings(&["--bogus", "--", "true"]))
                .unwrap_err()
                .contains("--bogus")
        );
        assert!(parse_run(&strings(&["--uid", "5"])).is_err());
        assert!(parse_run(&strings(&["--"])).is_err());
    }
}
