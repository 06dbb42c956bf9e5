//! SIGINT and SIGTERM: they stop the run (or batch), which stops itself cleanly.

/// The first SIGINT or SIGTERM the process got, once [`watch_signals`] has started
/// listening. Sticky, so a signal that arrives while no run is executing (between the
/// entries of a batch, or while a run is still planning) is not lost.
static SIGNALS: std::sync::OnceLock<tokio::sync::watch::Receiver<Option<&'static str>>> =
    std::sync::OnceLock::new();

/// Starts listening for SIGINT (Ctrl-C) and SIGTERM (a CI runner cancelling) for the rest
/// of the process; from then on they no longer end it: the run (or batch) stops itself.
pub fn watch_signals() -> tokio::sync::watch::Receiver<Option<&'static str>> {
    SIGNALS
        .get_or_init(|| {
            let (tx, rx) = tokio::sync::watch::channel(None);
            tokio::spawn(async move {
                let sig = wait_for_signal().await;
                let _ = tx.send(Some(sig));
                // Kept open so receivers wait on the value rather than on a closed channel.
                std::future::pending::<()>().await;
            });
            rx
        })
        .clone()
}

/// The signal that stopped the process's work, if one came since [`watch_signals`].
pub fn interrupted() -> Option<&'static str> {
    SIGNALS.get().and_then(|rx| *rx.borrow())
}

/// Resolves when the process has got SIGINT or SIGTERM, naming it: both stop the run the
/// same way.
pub(super) async fn interrupt_signal() -> &'static str {
    let mut rx = watch_signals();
    loop {
        if let Some(sig) = *rx.borrow_and_update() {
            return sig;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}
