// Records the git commit the binary was built from (for the machine fingerprint in run.json
// and `harness --version`), builds the in-container supervisor (container/supervisor/) as a
// static executable, and writes the table of every file the harness uploads into a task
// container (container/programs/ walked, and the supervisor).
fn main() {
    record_commit();
    build_supervisor();
    embed_container_programs();
}

/// The table of every file the harness puts into a task container (`src/assets.rs`
/// includes it): the supervisor, and every file under `harness/` (the in-container programs)
/// with its own executable bit, walked here so that no file can be added there and left
/// out of the containers or the result key.
fn embed_container_programs() {
    use std::os::unix::fs::PermissionsExt;
    let root = workspace().join("container/programs");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: cannot read: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a folder entry").path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if path.is_dir() {
                if name.as_deref() != Some("__pycache__") {
                    stack.push(path);
                }
            } else if path.extension().is_none_or(|x| x != "pyc") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut table = String::from(
        "&[\n    Asset {\n        path: \"opt/harness/bin/harness-supervisor\",\n        \
         bytes: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/harness-supervisor\")),\n        \
         mode: 0o755,\n    },\n",
    );
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .expect("under container/programs/")
            .to_string_lossy()
            .replace('\\', "/");
        let executable = std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        table.push_str(&format!(
            "    Asset {{\n        path: \"opt/harness/{rel}\",\n        bytes: include_bytes!({:?}),\n        mode: 0o{:o},\n    }},\n",
            path.display().to_string(),
            if executable { 0o755 } else { 0o644 }
        ));
    }
    table.push(']');
    let out = std::path::PathBuf::from(env("OUT_DIR")).join("assets.rs");
    std::fs::write(&out, table).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

fn record_commit() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let commit = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=HARNESS_GIT_COMMIT={commit}");
    let git = workspace().join(".git");
    println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
    println!("cargo:rerun-if-changed={}", git.join("index").display());
}

/// `cargo build --release` of container/supervisor/ for this target with glibc linked in statically
/// (`+crt-static`: the image's libraries must not be loaded into it), into a target folder
/// of its own (so this build's lock on the main one is not waited for), then copied into
/// OUT_DIR for `include_bytes!`.
fn build_supervisor() {
    let workspace = workspace();
    let out = std::path::PathBuf::from(env("OUT_DIR"));
    let target = env("TARGET");
    let target_dir = workspace.join("target").join("supervisor");
    for watched in [
        "container/supervisor/src",
        "container/supervisor/Cargo.toml",
        "Cargo.lock",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--release", "--locked", "-p", "harness-supervisor"])
        .arg("--target")
        .arg(&target)
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&workspace);
    // What the outer build set for itself must not leak into this one.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env(
        "RUSTFLAGS",
        "-C target-feature=+crt-static -C strip=symbols",
    );
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the supervisor: {e}"));
    if !status.success() {
        panic!("building the in-container supervisor (container/supervisor/) failed: {status}");
    }
    let built = target_dir
        .join(&target)
        .join("release")
        .join("harness-supervisor");
    std::fs::copy(&built, out.join("harness-supervisor"))
        .unwrap_or_else(|e| panic!("cannot copy {}: {e}", built.display()));
}

/// The workspace's root: this crate is `crates/sandbox/`.
fn workspace() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(std::path::Path::parent)
        .map(std::path::Path::to_path_buf)
        .unwrap_or(manifest)
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("cargo sets {key} for build scripts"))
}
