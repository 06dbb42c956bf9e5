//! `harness slurm submit`: one opt-at-k run fanned out as a Slurm array job, one element per
//! partition (`--partition $SLURM_ARRAY_TASK_ID/N`), each on its node's Docker engine,
//! writing into one fan-out folder on a shared file system, and a merge job that runs after
//! every element has ended (`--dependency=afterany`). The scripts are plain sbatch files
//! kept in the folder, so a failed element is resubmitted by hand with
//! `sbatch --array=I <folder>/slurm/array.sbatch` (resume does the rest) and the merge with
//! `sbatch <folder>/slurm/merge.sbatch`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::store::confined::Confined;
use crate::store::run_folder::model_slug;

/// What `harness slurm submit` is asked (the opt-at-k arguments already validated).
pub struct SubmitOptions {
    /// Array elements: one partition each.
    pub nodes: usize,
    /// The fan-out folder (shared by every node).
    pub out: PathBuf,
    pub gres: Option<String>,
    pub partition_name: Option<String>,
    pub sbatch_args: Vec<String>,
    /// The opt-at-k arguments, as given (without --partition and --results-dir).
    pub opt_at_k_args: Vec<String>,
    pub model: String,
    pub k: usize,
    /// Write the scripts, submit nothing.
    pub dry_run: bool,
}

/// `<out>/fanout.json`: what was submitted.
#[derive(Debug, Clone, Serialize)]
pub struct Fanout {
    pub schema_version: u32,
    pub engine: String,
    pub parts: usize,
    pub model: String,
    pub k: usize,
    /// Where the parts' run folders go.
    pub parts_dir: String,
    /// The merged run folder.
    pub merged_dir: String,
    pub array_script: String,
    pub merge_script: String,
    pub array_job: Option<String>,
    pub merge_job: Option<String>,
    pub submitted_at: String,
}

/// A word for a shell line: itself when it is plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

fn words(args: &[String]) -> String {
    args.iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn header(o: &SubmitOptions, job: &str, log: &Path) -> String {
    let mut out = format!(
        "#!/bin/bash\n#SBATCH --job-name={}\n#SBATCH --output={}\n",
        shell_word(job),
        shell_word(&log.display().to_string())
    );
    if let Some(p) = &o.partition_name {
        out.push_str(&format!("#SBATCH --partition={}\n", shell_word(p)));
    }
    out
}

/// The array job: element I runs part I of N into `<out>/parts`.
pub fn array_script(o: &SubmitOptions, harness: &Path, workdir: &Path) -> String {
    let slurm_dir = o.out.join("slurm");
    let mut s = header(
        o,
        &format!("harness-{}", model_slug(&o.model)),
        &slurm_dir.join("part-%a.log"),
    );
    s.push_str(&format!("#SBATCH --array=1-{}\n", o.nodes));
    if let Some(g) = &o.gres {
        s.push_str(&format!("#SBATCH --gres={}\n", shell_word(g)));
    }
    for a in &o.sbatch_args {
        s.push_str(&format!("#SBATCH {}\n", shell_word(a)));
    }
    s.push_str(&format!(
        "set -euo pipefail\ncd {}\n# Part I of N on this node's Docker engine; rerunning an element resumes its part.\n\
         exec {} opt-at-k {} --partition \"${{SLURM_ARRAY_TASK_ID}}/{}\" --results-dir {}\n",
        shell_word(&workdir.display().to_string()),
        shell_word(&harness.display().to_string()),
        words(&o.opt_at_k_args),
        o.nodes,
        shell_word(&o.out.join("parts").display().to_string())
    ));
    s
}

/// The merge job: every part under `<out>/parts` into `<out>/<model>-k<K>`.
pub fn merge_script(o: &SubmitOptions, harness: &Path, workdir: &Path) -> String {
    let mut s = header(
        o,
        &format!("harness-{}-merge", model_slug(&o.model)),
        &o.out.join("slurm").join("merge.log"),
    );
    s.push_str(&format!(
        "set -euo pipefail\ncd {}\nexec {} merge {} --out {}\n",
        shell_word(&workdir.display().to_string()),
        shell_word(&harness.display().to_string()),
        shell_word(&o.out.join("parts").display().to_string()),
        shell_word(&merged_dir(o).display().to_string())
    ));
    s
}

fn merged_dir(o: &SubmitOptions) -> PathBuf {
    o.out.join(format!("{}-k{}", model_slug(&o.model), o.k))
}

/// The job id `sbatch --parsable` printed (`id` or `id;cluster`).
fn job_id(out: &std::process::Output, what: &str) -> Result<String> {
    if !out.status.success() {
        bail!(
            "sbatch {what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        bail!("sbatch {what}: no job id in its output {text:?}");
    }
    Ok(id)
}

fn sbatch(args: &[String], what: &str) -> Result<String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .output()
        .with_context(|| {
            format!("cannot run sbatch for {what} (is Slurm's client installed and on PATH?)")
        })?;
    job_id(&out, what)
}

pub fn submit(mut o: SubmitOptions) -> Result<i32> {
    if o.nodes == 0 {
        bail!("--nodes 0: at least one array element is needed");
    }
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("{}: cannot create", o.out.display()))?;
    Confined::beneath(&o.out).create_dir_all(&o.out.join("slurm"))?;
    o.out = std::fs::canonicalize(&o.out)
        .with_context(|| format!("{}: cannot resolve", o.out.display()))?;
    let harness = std::env::current_exe().context("cannot find the harness binary's path")?;
    let workdir = std::env::current_dir().context("cannot read the working directory")?;
    let array_path = o.out.join("slurm/array.sbatch");
    let merge_path = o.out.join("slurm/merge.sbatch");
    // The fan-out's folder holds the parts' run folders: nothing in it through a link.
    let store = Confined::beneath(&o.out);
    store.write_atomic(&array_path, array_script(&o, &harness, &workdir).as_bytes())?;
    store.write_atomic(&merge_path, merge_script(&o, &harness, &workdir).as_bytes())?;
    let mut fanout = Fanout {
        schema_version: 1,
        engine: "slurm".into(),
        parts: o.nodes,
        model: o.model.clone(),
        k: o.k,
        parts_dir: o.out.join("parts").display().to_string(),
        merged_dir: merged_dir(&o).display().to_string(),
        array_script: array_path.display().to_string(),
        merge_script: merge_path.display().to_string(),
        array_job: None,
        merge_job: None,
        submitted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    if o.dry_run {
        store.write_json(&o.out.join("fanout.json"), &fanout)?;
        crate::outln!(
            "wrote {} and {} (not submitted: --dry-run)",
            array_path.display(),
            merge_path.display()
        );
        return Ok(0);
    }
    let array = sbatch(&[array_path.display().to_string()], "the array job")?;
    let merge = sbatch(
        &[
            format!("--dependency=afterany:{array}"),
            merge_path.display().to_string(),
        ],
        "the merge job",
    )?;
    fanout.array_job = Some(array.clone());
    fanout.merge_job = Some(merge.clone());
    store.write_json(&o.out.join("fanout.json"), &fanout)?;
    crate::outln!(
        "array job {array} ({} parts), merge job {merge} (after it)",
        o.nodes
    );
    crate::outln!("progress: harness status {}", o.out.display());
    crate::outln!(
        "a failed part I: sbatch --array=I {}, then sbatch {}",
        array_path.display(),
        merge_path.display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> SubmitOptions {
        SubmitOptions {
            nodes: 3,
            out: PathBuf::from("/shared/fan out"),
            gres: Some("gpu:1".into()),
            partition_name: Some("gpu".into()),
            sbatch_args: vec!["--time=02:00:00".into()],
            opt_at_k_args: vec![
                "--model".into(),
                "it's".into(),
                "--predictions".into(),
                "p.jsonl".into(),
                "--k".into(),
                "3".into(),
            ],
            model: "it's".into(),
            k: 3,
            dry_run: true,
        }
    }

    #[test]
    fn the_array_script_runs_part_i_of_n_with_the_arguments_quoted() {
        let s = array_script(
            &options(),
            Path::new("/opt/harness"),
            Path::new("/work dir"),
        );
        assert!(s.starts_with("#!/bin/bash\n"));
        assert!(s.contains("#SBATCH --array=1-3\n"), "{s}");
        assert!(
            s.contains("#SBATCH --gres=gpu:1\n#SBATCH --time=02:00:00\n"),
            "{s}"
        );
        assert!(s.contains("#SBATCH --partition=gpu\n"), "{s}");
        assert!(
            s.contains("#SBATCH --output='/shared/fan out/slurm/part-%a.log'\n"),
            "{s}"
        );
        assert!(s.contains("cd '/work dir'\n"), "{s}");
        assert!(
            s.contains("exec /opt/harness opt-at-k --model 'it'\\''s' --predictions p.jsonl --k 3 --partition \"${SLURM_ARRAY_TASK_ID}/3\" --results-dir '/shared/fan out/parts'\n"),
            "{s}"
        );
        let m = merge_script(&options(), Path::new("/opt/harness"), Path::new("/w"));
        assert!(
            m.contains(
                "exec /opt/harness merge '/shared/fan out/parts' --out '/shared/fan out/it_s-"
            ),
            "{m}"
        );
    }

    #[test]
    fn job_ids_are_read_and_failures_named() {
        use std::os::unix::process::ExitStatusExt;
        let out = |code: i32, stdout: &str| std::process::Output {
            status: std::process::ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: b"sbatch: error: invalid partition".to_vec(),
        };
        assert_eq!(job_id(&out(0, "42\n"), "x").unwrap(), "42");
        assert_eq!(job_id(&out(0, "42;cluster\n"), "x").unwrap(), "42");
        let e = job_id(&out(1, ""), "the array job")
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid partition"), "{e}");
        assert!(job_id(&out(0, "Submitted batch job 42"), "x").is_err());
    }
}
