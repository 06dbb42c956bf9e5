//! `harness k8s manifest`: one opt-at-k run fanned out over a Kubernetes cluster as an
//! Indexed Job (pod I runs `--partition $((JOB_COMPLETION_INDEX + 1))/N`, one pod per
//! partition) and a merge Job that waits until every part is done (`harness status` on
//! the shared volume) and merges them. Each pod talks to a Docker engine: the node's
//! (its socket mounted) or a Docker-in-Docker sidecar. Results go to a shared volume (a
//! ReadWriteMany claim). The manifest is printed as YAML; nothing is applied.

use serde_json::{Value, json};

use crate::store::run_folder::model_slug;

/// Which Docker engine the pods use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DockerMode {
    /// The node's engine, by its socket (/var/run/docker.sock, a hostPath).
    Socket,
    /// A privileged docker:dind sidecar in every pod.
    Dind,
}

impl std::str::FromStr for DockerMode {
    type Err = String;

    fn from_str(s: &str) -> Result<DockerMode, String> {
        match s {
            "socket" => Ok(DockerMode::Socket),
            "dind" => Ok(DockerMode::Dind),
            _ => Err(format!("{s:?}: expected socket or dind")),
        }
    }
}

/// What the manifest is made from (the opt-at-k arguments already validated).
pub struct ManifestOptions {
    pub parts: usize,
    pub name: String,
    pub image: String,
    pub claim: String,
    pub gpus_per_pod: u32,
    pub docker: DockerMode,
    pub namespace: Option<String>,
    pub opt_at_k_args: Vec<String>,
    pub model: String,
    pub k: usize,
}

const RESULTS: &str = "/results";

fn metadata(o: &ManifestOptions, name: &str) -> Value {
    let mut m = json!({
        "name": name,
        "labels": {"app.kubernetes.io/name": "harness", "harness/fanout": o.name},
    });
    if let Some(ns) = &o.namespace {
        m["namespace"] = json!(ns);
    }
    m
}

fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| crate::app::slurm::shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The pod of one partition: the harness container, and the Docker engine it talks to.
fn partition_pod(o: &ManifestOptions) -> Value {
    let command = format!(
        "exec harness opt-at-k {} --partition \"$((JOB_COMPLETION_INDEX + 1))/{}\" --results-dir {RESULTS}/parts",
        shell_line(&o.opt_at_k_args),
        o.parts
    );
    let mut harness = json!({
        "name": "harness",
        "image": o.image,
        "command": ["/bin/sh", "-c", command],
        "volumeMounts": [{"name": "results", "mountPath": RESULTS}],
        "env": [],
    });
    if o.gpus_per_pod > 0 {
        harness["resources"] = json!({"limits": {"nvidia.com/gpu": o.gpus_per_pod}});
    }
    let mut volumes = vec![json!({
        "name": "results",
        "persistentVolumeClaim": {"claimName": o.claim},
    })];
    let mut containers = vec![harness];
    match o.docker {
        DockerMode::Socket => {
            volumes.push(json!({
                "name": "docker-sock",
                "hostPath": {"path": "/var/run/docker.sock", "type": "Socket"},
            }));
            if let Some(mounts) = containers[0]["volumeMounts"].as_array_mut() {
                mounts.push(json!({"name": "docker-sock", "mountPath": "/var/run/docker.sock"}));
            }
        }
        DockerMode::Dind => {
            volumes.push(json!({"name": "dind-storage", "emptyDir": {}}));
            containers[0]["env"] =
                json!([{"name": "DOCKER_HOST", "value": "tcp://localhost:2375"}]);
            containers.push(json!({
                "name": "dind",
                "image": "docker:dind",
                "securityContext": {"privileged": true},
                "env": [{"name": "DOCKER_TLS_CERTDIR", "value": ""}],
                "volumeMounts": [{"name": "dind-storage", "mountPath": "/var/lib/docker"}],
            }));
        }
    }
    json!({
        "metadata": {"labels": {"app.kubernetes.io/name": "harness", "harness/fanout": o.name}},
        "spec": {"restartPolicy": "Never", "containers": containers, "volumes": volumes},
    })
}

/// The Indexed Job: N completions, N pods at once, a failed pod retried (resume).
pub fn partition_job(o: &ManifestOptions) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(o, &o.name),
        "spec": {
            "completionMode": "Indexed",
            "completions": o.parts,
            "parallelism": o.parts,
            "backoffLimitPerIndex": 2,
            "template": partition_pod(o),
        },
    })
}

/// The merge Job: waits until `harness status` sees every part done, then merges.
pub fn merge_job(o: &ManifestOptions) -> Value {
    let merged = format!("{RESULTS}/{}-k{}", model_slug(&o.model), o.k);
    let script = format!(
        "until harness status {RESULTS}/parts 2>/dev/null | grep -q 'every part is done'; do sleep 30; done\n\
         exec harness merge {RESULTS}/parts --out {merged}"
    );
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(o, &format!("{}-merge", o.name)),
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "harness", "harness/fanout": o.name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "merge",
                        "image": o.image,
                        "command": ["/bin/sh", "-c", script],
                        "volumeMounts": [{"name": "results", "mountPath": RESULTS}],
                    }],
                    "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": o.claim}}],
                },
            },
        },
    })
}

/// Both Jobs as one YAML stream.
pub fn manifest(o: &ManifestOptions) -> anyhow::Result<String> {
    let mut out = String::from(
        "# harness fan-out: an Indexed Job (one pod per partition) and a merge Job.\n\
         # Apply with `kubectl apply -f`; results land on the claim's volume.\n",
    );
    for doc in [partition_job(o), merge_job(o)] {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&doc)?);
    }
    Ok(out)
}

pub fn command(o: ManifestOptions) -> anyhow::Result<i32> {
    if o.parts == 0 {
        anyhow::bail!("--parts 0: at least one partition is needed");
    }
    let valid_name = !o.name.is_empty()
        && o.name.len() <= 52
        && o.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !o.name.starts_with('-')
        && !o.name.ends_with('-');
    if !valid_name {
        anyhow::bail!(
            "--name {:?}: a Kubernetes Job name here is lowercase letters, digits and '-', at most 52 characters",
            o.name
        );
    }
    crate::out!("{}", manifest(&o)?);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(docker: DockerMode) -> ManifestOptions {
        ManifestOptions {
            parts: 4,
            name: "fan".into(),
            image: "registry.local/harness:1".into(),
            claim: "results".into(),
            gpus_per_pod: 1,
            docker,
            namespace: None,
            opt_at_k_args: vec!["--model".into(), "m".into(), "--k".into(), "3".into()],
            model: "m".into(),
            k: 3,
        }
    }

    #[test]
    fn pod_i_runs_part_i_plus_one_with_its_gpu_and_engine() {
        let job = partition_job(&options(DockerMode::Socket));
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!(job["spec"]["completions"], 4);
        let c = &job["spec"]["template"]["spec"]["containers"][0];
        let cmd = c["command"][2].as_str().unwrap();
        assert!(
            cmd.contains(
                "--partition \"$((JOB_COMPLETION_INDEX + 1))/4\" --results-dir /results/parts"
            ),
            "{cmd}"
        );
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 1);
        assert_eq!(c["volumeMounts"][1]["mountPath"], "/var/run/docker.sock");
        let dind = partition_job(&options(DockerMode::Dind));
        let cs = &dind["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[1]["image"], "docker:dind");
        assert_eq!(cs[0]["env"][0]["value"], "tcp://localhost:2375");
        let merge = merge_job(&options(DockerMode::Socket));
        let script = merge["spec"]["template"]["spec"]["containers"][0]["command"][2]
            .as_str()
            .unwrap();
        assert!(
            script.contains("merge /results/parts --out /results/m-k3"),
            "{script}"
        );
    }
}
