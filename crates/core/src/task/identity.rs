//! A task's evaluation identity: what of it goes into a sample's result key.

use super::*;

impl Task {
    /// Everything of the task that a sample's result depends on beyond its source and image,
    /// as canonical JSON for the result key. Written by destructuring every field, so a
    /// field added to `Task`, `Bench` or `Resources` does not compile until it is placed
    /// here (in the key, or left out with the reason).
    pub fn evaluation_identity(&self) -> serde_json::Value {
        let Task {
            id,
            // Where the task lives, its prose and its stated commits change no result;
            // source, human and image are in the material digest and the image tag.
            dir: _,
            toml_path: _,
            description: _,
            source: _,
            human: _,
            commits: _,
            protected_set: _,
            base_image,
            setup,
            // The files' contents are in the material digest.
            image_files: _,
            // Names only: which variables a run passes is not a result's input (their
            // values never are).
            env_pass: _,
            setup_timeout,
            install,
            install_timeout,
            test_command,
            test_timeout,
            benches,
            measure_max_seconds,
            replicas,
            repetitions,
            resources,
            protected,
        } = self;
        let Resources {
            cpus,
            memory_bytes,
            pids,
            network,
            gpus,
            disk_bytes,
        } = resources;
        let benches: Vec<serde_json::Value> = benches
            .iter()
            .map(|b| {
                let Bench {
                    name,
                    command,
                    warmups,
                    runs,
                    max_runs,
                    timeout,
                    metric,
                    better,
                    metric_unit_s,
                    output_check,
                } = b;
                let check = match output_check {
                    OutputCheck::Stdout { ignore } => {
                        serde_json::json!({"stdout": {"ignore": ignore}})
                    }
                    // Without an equivalence command, the identity it always had.
                    OutputCheck::File {
                        path,
                        equivalence: None,
                    } => serde_json::json!({"file": path}),
                    OutputCheck::File {
                        path,
                        equivalence: Some(command),
                    } => serde_json::json!({"file": path, "equivalence": command}),
                    OutputCheck::Off { reason } => serde_json::json!({"off": reason}),
                };
                serde_json::json!({
                    "name": name, "command": command, "warmups": warmups, "runs": runs,
                    "max_runs": max_runs, "timeout_s": timeout.as_secs_f64(),
                    "metric": metric.describe(), "better": better,
                    "metric_unit_s": metric_unit_s, "output_check": check,
                })
            })
            .collect();
        let mut identity = serde_json::json!({
            "id": id,
            "base_image": base_image,
            "setup": setup,
            "setup_timeout_s": setup_timeout.as_secs_f64(),
            "install": install,
            "install_timeout_s": install_timeout.as_secs_f64(),
            "test_command": test_command,
            "test_timeout_s": test_timeout.as_secs_f64(),
            "benches": benches,
            "measure_max_seconds": measure_max_seconds,
            "replicas": replicas,
            "resources": {
                "cpus": cpus, "memory_bytes": memory_bytes, "pids": pids,
                "network": network, "gpus": gpus, "disk_bytes": disk_bytes,
            },
            "protected": protected,
        });
        // Only when set: tasks that leave it out keep the identity they had before it existed.
        if let (Some(r), Some(map)) = (repetitions, identity.as_object_mut()) {
            map.insert("repetitions".into(), serde_json::json!(r));
        }
        identity
    }
}
