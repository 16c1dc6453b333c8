//! Charges an order exactly once, however often this program is killed and rerun.
//!
//! ```text
//! cargo run -p oncekey-client --example charge -- ORDER_ID AMOUNT_CENTS
//! ```
//!
//! Environment:
//! - `ONCEKEY_SERVER` (default `http://127.0.0.1:50051`), `ONCEKEY_TOKEN` or `ONCEKEY_TENANT`;
//! - `CHARGE_PROVIDER_FILE`: the fake payment provider's ledger, one line per charge (default
//!   `./fake-provider-charges.tsv`);
//! - `CHARGE_PROVIDER_DELAY_MS`: how long the provider takes to answer *after* it has charged
//!   (default 0): kill the program during that time to see a crash after the side effect;
//! - `CHARGE_LEASE_MS`: the lease length (default 10000).
//!
//! A charge must never happen twice, so it runs **at most once**: if this program dies mid-charge,
//! the next run finds the operation's outcome unknown, asks the provider whether the charge went
//! through (by the idempotency key it was sent with), and records what it finds. The output is one
//! JSON line: the receipt, and whether it was charged now, replayed, or reconciled.

use oncekey_client::{
    Client, ConnectOptions, Disposition, Failure, Lease, OnceError, OperationKey,
};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The charge's significant arguments: what makes two requests the same intent.
#[derive(Debug, Serialize)]
struct ChargeArgs<'a> {
    order: &'a str,
    amount_cents: u64,
    currency: &'a str,
}

/// What the provider answered: stored in the ledger and replayed to every rerun.
#[derive(Debug, Serialize, Deserialize)]
struct Receipt {
    charge_id: String,
    amount_cents: u64,
    fencing_token: u64,
}

#[derive(Debug, thiserror::Error)]
enum ChargeError {
    #[error("invalid amount: must be 1..=1000000 cents")]
    InvalidAmount,
    #[error("card declined")]
    Declined,
    #[error("payment provider unavailable: {0}")]
    ProviderDown(String),
    #[error("the provider has no charge for this key")]
    NotCharged,
}

impl Failure for ChargeError {
    fn disposition(&self) -> Disposition {
        match self {
            // Refused before anything happened: forget the key.
            ChargeError::InvalidAmount => Disposition::Abandon,
            // The provider said no: every rerun gets the same answer.
            ChargeError::Declined => Disposition::Final,
            // Nothing charged: the next run may try again.
            ChargeError::ProviderDown(_) | ChargeError::NotCharged => Disposition::Retryable,
        }
    }

    fn code(&self) -> i32 {
        match self {
            ChargeError::InvalidAmount => 400,
            ChargeError::Declined => 402,
            ChargeError::ProviderDown(_) | ChargeError::NotCharged => 503,
        }
    }
}

/// A stand-in for a payment provider: each charge is a line in a file.
struct FakeProvider {
    path: PathBuf,
    delay: Duration,
}

impl FakeProvider {
    fn lines(&self) -> Result<Vec<String>, ChargeError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(ChargeError::ProviderDown(e.to_string())),
        }
    }

    /// Charges the card, then takes `delay` to answer.
    async fn charge(&self, reference: &str, amount_cents: u64) -> Result<String, ChargeError> {
        if amount_cents == 0 || amount_cents > 1_000_000 {
            return Err(ChargeError::InvalidAmount);
        }
        if amount_cents == 666 {
            return Err(ChargeError::Declined);
        }
        let charge_id = format!("ch_{:06}", self.lines()?.len() + 1);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| ChargeError::ProviderDown(e.to_string()))?;
        writeln!(file, "{charge_id}\t{reference}\t{amount_cents}")
            .and_then(|()| file.sync_all())
            .map_err(|e| ChargeError::ProviderDown(e.to_string()))?;
        tokio::time::sleep(self.delay).await;
        Ok(charge_id)
    }

    /// The charge made with `reference`, if any (providers let you search by your reference).
    fn find(&self, reference: &str) -> Result<Option<(String, u64)>, ChargeError> {
        Ok(self.lines()?.iter().find_map(|line| {
            let mut fields = line.split('\t');
            let (id, r, amount) = (fields.next()?, fields.next()?, fields.next()?);
            (r == reference).then(|| (id.to_owned(), amount.parse().unwrap_or(0)))
        }))
    }
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(order), Some(amount)) = (args.next(), args.next()) else {
        eprintln!("usage: charge ORDER_ID AMOUNT_CENTS");
        std::process::exit(64);
    };
    let amount_cents: u64 = amount.parse()?;
    let provider = FakeProvider {
        path: std::env::var_os("CHARGE_PROVIDER_FILE")
            .map(PathBuf::from)
            .unwrap_or_else(|| "fake-provider-charges.tsv".into()),
        delay: env_ms("CHARGE_PROVIDER_DELAY_MS", 0),
    };
    let client = Client::connect(
        &std::env::var("ONCEKEY_SERVER").unwrap_or_else(|_| "http://127.0.0.1:50051".into()),
        ConnectOptions {
            token: std::env::var("ONCEKEY_TOKEN").ok(),
            tenant: std::env::var("ONCEKEY_TENANT").ok(),
            owner: Some(format!("charge-example/{}", std::process::id())),
            ..Default::default()
        },
    )
    .await?;

    // Deterministic: the same order always gives the same key and the same arguments.
    let key = OperationKey::new("payments.charge", [order.as_str(), "charge", "v1"])?;
    let args = ChargeArgs {
        order: &order,
        amount_cents,
        currency: "EUR",
    };
    let once = client
        .once(&key, &args)
        .at_most_once()
        .lease_ttl(env_ms("CHARGE_LEASE_MS", 10_000))
        .wait_timeout(Duration::from_secs(120));
    // The provider is sent the key as its own idempotency reference, so reconciliation can ask it.
    let reference = key.to_string();
    let (provider, reference) = (&provider, reference.as_str());

    let mut reconciled = false;
    let done = loop {
        let charge = |lease: Lease| async move {
            let charge_id = provider.charge(reference, amount_cents).await?;
            Ok::<_, ChargeError>(Receipt {
                charge_id,
                amount_cents,
                fencing_token: lease.fencing_token(),
            })
        };
        match once.clone().run_detailed(charge).await {
            Ok(done) => break done,
            Err(OnceError::NeedsReconciliation { record }) => {
                eprintln!(
                    "a previous run (attempt {}) vanished mid-charge: asking the provider",
                    record.attempt
                );
                let check = |lease: Lease| async move {
                    match provider.find(reference)? {
                        Some((charge_id, amount_cents)) => Ok(Receipt {
                            charge_id,
                            amount_cents,
                            fencing_token: lease.fencing_token(),
                        }),
                        // Never charged: release the key so the loop charges it now.
                        None => Err::<Receipt, _>(ChargeError::NotCharged),
                    }
                };
                match once.clone().reconcile(check).await {
                    Ok(done) => {
                        reconciled = !done.replayed;
                        break done;
                    }
                    Err(OnceError::Operation(ChargeError::NotCharged)) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(OnceError::Operation(e)) => {
                println!(
                    r#"{{"order":{order:?},"status":"failed","error":{:?}}}"#,
                    e.to_string()
                );
                std::process::exit(2);
            }
            Err(OnceError::Failed(stored)) => {
                println!(
                    r#"{{"order":{order:?},"status":"failed","error":{:?},"replayed":true}}"#,
                    stored.message
                );
                std::process::exit(2);
            }
            Err(e) => return Err(e.into()),
        }
    };
    let how = match (done.replayed, reconciled) {
        (true, _) => "replayed",
        (false, true) => "reconciled",
        (false, false) => "charged",
    };
    println!(
        r#"{{"order":{order:?},"status":{how:?},"charge_id":{:?},"amount_cents":{},"fencing_token":{}}}"#,
        done.value.charge_id, done.value.amount_cents, done.value.fencing_token
    );
    Ok(())
}
