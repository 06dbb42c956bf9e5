//! The channel events travel on, from the runner to the one reporter.

use tokio::sync::mpsc;

use harness_core::events::Event;

pub type Events = mpsc::UnboundedSender<Event>;

/// Sends, ignoring a closed reporter: progress must never fail a run.
pub fn emit(events: &Events, e: Event) {
    let _ = events.send(e);
}
