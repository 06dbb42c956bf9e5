//! Beside Opt@K, the agent x model entries' other orders: fastest (the agents' wall time),
//! most efficient (fewest tokens, then requests) and cheapest (dollars), each within a group
//! of comparable entries and over complete entries only. A cost the price table cannot give
//! takes no part in "cheapest" and is said so.

use super::{EntryResult, EntryState, Group};
use crate::core::spend::{SpendTotals, dollars_text};

/// One line per order, per group with at least two complete agent entries.
pub fn notes(groups: &[Group], entries: &[EntryResult]) -> Vec<String> {
    let mut notes = Vec::new();
    for g in groups {
        let spent: Vec<(&str, &SpendTotals)> = entries
            .iter()
            .filter(|e| e.group == g.group && e.state == EntryState::Complete)
            .filter_map(|e| Some((e.label.as_str(), e.figures.as_ref()?.agents.as_ref()?)))
            .collect();
        if spent.len() < 2 {
            continue;
        }
        let of = if groups.len() > 1 {
            format!(" (group {})", g.group)
        } else {
            String::new()
        };
        if let Some((label, t)) = spent
            .iter()
            .min_by(|a, b| a.1.agent_seconds.total_cmp(&b.1.agent_seconds))
        {
            notes.push(format!(
                "fastest{of}: {label} (its agents' wall time {:.0} s)",
                t.agent_seconds
            ));
        }
        // Only entries whose every answer reported its tokens: "fewest" is not a floor.
        if let Some((label, t)) = spent
            .iter()
            .filter(|(_, t)| t.unknown_token_samples == 0)
            .min_by_key(|(_, t)| (t.tokens(), t.requests))
        {
            let uncounted: Vec<&str> = spent
                .iter()
                .filter(|(_, t)| t.unknown_token_samples > 0)
                .map(|(l, _)| *l)
                .collect();
            notes.push(format!(
                "most efficient{of}: {label} ({} tokens in {} requests){}",
                t.tokens(),
                t.requests,
                if uncounted.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} had answers that reported no tokens (not compared)",
                        uncounted.join(", ")
                    )
                }
            ));
        }
        let unknown: Vec<&str> = spent
            .iter()
            .filter(|(_, t)| t.cost_usd.is_none())
            .map(|(l, _)| *l)
            .collect();
        if let Some((label, t)) =
            spent
                .iter()
                .filter(|(_, t)| t.cost_usd.is_some())
                .min_by(|a, b| {
                    a.1.cost_usd
                        .unwrap_or(0.0)
                        .total_cmp(&b.1.cost_usd.unwrap_or(0.0))
                })
        {
            notes.push(format!(
                "cheapest{of}: {label} ({}){}",
                dollars_text(t.cost_usd),
                if unknown.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; the cost of {} is unknown (a model the price table does not price)",
                        unknown.join(", ")
                    )
                }
            ));
        }
    }
    notes
}
