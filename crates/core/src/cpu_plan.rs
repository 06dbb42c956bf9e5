//! How the machine's cores are split into exclusive slots: each task in flight owns a set of
//! cores, and every container of the task is pinned to them (the pool that hands them out is
//! `harness_sandbox::cpu_slots`). Image builds run on the cores no slot holds, so a bench never
//! shares cores with another task's bench, build or tests.

/// How the machine's cores are split.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CpuPlan {
    pub machine_cores: usize,
    /// Cores left to the harness, the Docker daemon and the OS.
    pub reserved: Vec<usize>,
    /// One cpuset string (as Docker takes it, e.g. "1" or "2-3") per slot.
    pub slots: Vec<String>,
    /// The cores no slot holds, where image builds run while benches run; None on a
    /// machine too small to have any (builds then take a slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
}

fn cpuset_string(cores: &[usize]) -> String {
    match (cores.first(), cores.last()) {
        (Some(a), Some(b)) if cores.len() > 1 && b - a + 1 == cores.len() => format!("{a}-{b}"),
        _ => cores
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Splits `machine_cores` into at most `jobs` slots of `width` cores. Core 0 is kept for
/// the harness and the daemon when there are at least two cores; a task wider than what is
/// left gets every core but that one (or every core, on a one-core machine).
pub fn plan_slots(machine_cores: usize, jobs: usize, width: usize) -> CpuPlan {
    let machine_cores = machine_cores.max(1);
    let (reserved, bench): (Vec<usize>, Vec<usize>) = if machine_cores >= 2 {
        (vec![0], (1..machine_cores).collect())
    } else {
        (vec![], vec![0])
    };
    let width = width.clamp(1, bench.len());
    let count = (bench.len() / width).clamp(1, jobs.max(1));
    let slots = (0..count)
        .map(|i| cpuset_string(&bench[i * width..(i + 1) * width]))
        .collect();
    let free: Vec<usize> = reserved
        .iter()
        .copied()
        .chain(bench[count * width..].iter().copied())
        .collect();
    CpuPlan {
        machine_cores,
        reserved,
        slots,
        build: (!free.is_empty()).then(|| cpuset_string(&free)),
    }
}

/// Number of cores a task's `cpus` needs.
pub fn width_for(cpus: f64) -> usize {
    (cpus.ceil() as usize).max(1)
}

/// Number of cores in a cpuset string ("1", "2-3", "0,2").
pub fn cpuset_len(cpuset: &str) -> usize {
    cpuset
        .split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_leave_core_zero() {
        let p = plan_slots(2, 1, 1);
        assert_eq!(p.reserved, vec![0]);
        assert_eq!(p.slots, vec!["1"]);
        let p = plan_slots(2, 4, 1);
        assert_eq!(p.slots, vec!["1"], "only one core to bench on");
        let p = plan_slots(16, 4, 2);
        assert_eq!(p.slots, vec!["1-2", "3-4", "5-6", "7-8"]);
        let p = plan_slots(16, 100, 3);
        assert_eq!(p.slots.len(), 5);
        let p = plan_slots(4, 2, 8);
        assert_eq!(p.slots, vec!["1-3"], "too wide: every core but 0");
        let p = plan_slots(1, 3, 1);
        assert_eq!(p.slots, vec!["0"]);
        assert!(p.reserved.is_empty());
        assert_eq!(p.build, None, "one core: builds must take the slot");
    }

    #[test]
    fn builds_get_the_cores_no_slot_holds() {
        assert_eq!(plan_slots(2, 1, 1).build.as_deref(), Some("0"));
        assert_eq!(
            plan_slots(16, 4, 2).build.as_deref(),
            Some("0,9,10,11,12,13,14,15")
        );
        assert_eq!(plan_slots(4, 2, 8).build.as_deref(), Some("0"));
        for (cores, jobs, width) in [(2, 1, 1), (16, 4, 2), (16, 100, 3), (4, 2, 8)] {
            let p = plan_slots(cores, jobs, width);
            let build = p.build.unwrap_or_default();
            for slot in &p.slots {
                for core in slot.split([',', '-']) {
                    assert!(!build.split(',').any(|b| b == core), "{slot} in {build}");
                }
            }
        }
    }

    #[test]
    fn cpuset_lengths() {
        assert_eq!(cpuset_len("1"), 1);
        assert_eq!(cpuset_len("1-3"), 3);
        assert_eq!(cpuset_len("0,2,4-5"), 4);
        assert_eq!(width_for(1.0), 1);
        assert_eq!(width_for(1.5), 2);
        assert_eq!(width_for(0.5), 1);
    }
}
