//! Books a trip as a saga — a flight, a hotel, then the payment — so that every booking and every
//! cancellation happens once, however often this program is killed and rerun.
//!
//! ```text
//! cargo run -p oncekey-client --example trip -- TRIP_ID
//! ```
//!
//! Each step is undone by a compensation if a later step fails for good: a declined payment
//! cancels the hotel, then the flight. Rerunning with the same trip id resumes from the ledger:
//! steps and cancellations already done are replayed, not redone. The output is one JSON line.
//!
//! Environment:
//! - `ONCEKEY_SERVER` (default `http://127.0.0.1:50051`), `ONCEKEY_TOKEN` or `ONCEKEY_TENANT`;
//! - `TRIP_LOG`: the fake providers' log, one line per booking or cancellation (default
//!   `./fake-trip-providers.log`);
//! - `TRIP_FAIL`: a step (`flight`, `hotel`, `payment`) the provider declines;
//!   `TRIP_FAIL_UNDO`: a step whose cancellation the provider refuses;
//! - `TRIP_PAUSE`: stop forever at a point, to kill the process there: `before-STEP` (between
//!   steps), `STEP` (in the step, before the provider acts) or `undo-STEP` (in its cancellation);
//! - `TRIP_LEASE_MS`: the lease length (default 10000): how soon a rerun resumes after a crash.

use oncekey_client::{
    Client, ConnectOptions, Disposition, Failure, OperationKey, SagaError, SagaStart,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
enum TripError {
    #[error("{0} declined")]
    Declined(String),
    #[error("provider unreachable: {0}")]
    Unreachable(String),
}

impl Failure for TripError {
    fn disposition(&self) -> Disposition {
        match self {
            TripError::Declined(_) => Disposition::Final, // roll the trip back
            TripError::Unreachable(_) => Disposition::Retryable, // a rerun tries again
        }
    }
}

/// What a provider answered: stored with the step, and given to its cancellation.
#[derive(Debug, Serialize, Deserialize)]
struct Booking {
    reference: String,
}

/// Fake providers: each booking or cancellation is a line in a file.
struct Providers {
    log: PathBuf,
    trip: String,
    fail: Option<String>,
    fail_undo: Option<String>,
    pause: Option<String>,
}

impl Providers {
    async fn pause_at(&self, point: &str) {
        if self.pause.as_deref() == Some(point) {
            println!("paused at {point}");
            let _ = std::io::stdout().flush();
            std::future::pending::<()>().await;
        }
    }

    fn write(&self, line: &str) -> Result<(), TripError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .and_then(|mut f| writeln!(f, "{line}").map(|()| f))
            .map_err(|e| TripError::Unreachable(e.to_string()))?;
        file.flush()
            .map_err(|e| TripError::Unreachable(e.to_string()))
    }

    async fn book(&self, step: &str) -> Result<Booking, TripError> {
        self.pause_at(step).await;
        if self.fail.as_deref() == Some(step) {
            self.write(&format!("declined {step} {}", self.trip))?;
            return Err(TripError::Declined(step.into()));
        }
        self.write(&format!("book {step} {}", self.trip))?;
        Ok(Booking {
            reference: format!("{step}-{}", self.trip),
        })
    }

    async fn cancel(&self, step: &str, booking: Booking) -> Result<(), TripError> {
        self.pause_at(&format!("undo-{step}")).await;
        if self.fail_undo.as_deref() == Some(step) {
            self.write(&format!("refused cancel {step} {}", booking.reference))?;
            return Err(TripError::Declined(format!("cancelling {step}")));
        }
        self.write(&format!("cancel {step} {}", booking.reference))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(trip) = std::env::args().nth(1) else {
        eprintln!("usage: trip TRIP_ID");
        std::process::exit(64);
    };
    let providers = Providers {
        log: std::env::var_os("TRIP_LOG")
            .map(PathBuf::from)
            .unwrap_or_else(|| "fake-trip-providers.log".into()),
        trip: trip.clone(),
        fail: std::env::var("TRIP_FAIL").ok(),
        fail_undo: std::env::var("TRIP_FAIL_UNDO").ok(),
        pause: std::env::var("TRIP_PAUSE").ok(),
    };
    let lease_ms = std::env::var("TRIP_LEASE_MS")
        .ok()
        .and_then(|v| v.parse().ok());
    let client = Client::connect(
        &std::env::var("ONCEKEY_SERVER").unwrap_or_else(|_| "http://127.0.0.1:50051".into()),
        ConnectOptions {
            token: std::env::var("ONCEKEY_TOKEN").ok(),
            tenant: std::env::var("ONCEKEY_TENANT").ok(),
            ..Default::default()
        },
    )
    .await?;

    // One saga per trip; its steps are the children trip-42:v1/flight, …/hotel, …/payment.
    let key = OperationKey::new("trips.book", [trip.as_str(), "v1"])?;
    let start = client
        .saga(&key)
        .lease_ttl(Duration::from_millis(lease_ms.unwrap_or(10_000)))
        .wait_timeout(Duration::from_secs(120))
        .start::<Vec<String>, TripError>()
        .await;
    let mut saga = match start {
        Ok(SagaStart::Run(saga)) => saga,
        Ok(SagaStart::Finished(bookings)) => {
            return report(&trip, "replayed", json!({ "bookings": bookings }))
        }
        Err(e) => return outcome(&trip, e),
    };
    let resumed = saga.resumed();
    let p = &providers;
    let mut bookings = Vec::new();
    for step in ["flight", "hotel", "payment"] {
        p.pause_at(&format!("before-{step}")).await;
        let booked = saga
            .step(
                step,
                &json!({ "trip": p.trip, "step": step }),
                |_lease| p.book(step),
                move |booking| p.cancel(step, booking),
            )
            .await;
        match booked {
            Ok(booking) => bookings.push(booking.reference),
            Err(e) => return outcome(&trip, e),
        }
    }
    if let Err(e) = saga.finish(&bookings).await {
        return outcome(&trip, e);
    }
    report(
        &trip,
        "booked",
        json!({ "bookings": bookings, "resumed": resumed }),
    )
}

/// Prints what became of a saga that did not finish.
fn outcome(trip: &str, error: SagaError<TripError>) -> Result<(), Box<dyn std::error::Error>> {
    match error {
        SagaError::RolledBack { step, cause } => report(
            trip,
            "rolled_back",
            json!({ "step": step, "cause": cause.to_string() }),
        ),
        SagaError::NeedsReconciliation { step, cause, .. } => report(
            trip,
            "needs_reconciliation",
            json!({ "step": step, "cause": cause.to_string() }),
        ),
        other => Err(other.to_string().into()),
    }
}

fn report(
    trip: &str,
    status: &str,
    mut fields: serde_json::Value,
) -> Result<(), Box<dyn std::error::Error>> {
    fields["trip"] = json!(trip);
    fields["status"] = json!(status);
    println!("{fields}");
    Ok(())
}
