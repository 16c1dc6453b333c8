//! The Rust client for Oncekey, the shared idempotency ledger.
//!
//! Before a side effect (charge a card, send an email, create a task) a service asks the ledger
//! whether it may perform operation *K* now, and tells it the outcome afterwards; every retry of the
//! same intent carries the same key, so a retry after a crash or a timeout gets the stored outcome
//! instead of a second side effect. This crate makes that safe path the easy one:
//!
//! - [`OperationKey`]: deterministic keys from stable business parts plus an operation version,
//!   and child keys for the steps of a workflow. No random keys unless you ask for one.
//! - [`Client::once`] … [`Once::run`]: Claim, run your closure only when acquired while the lease
//!   is kept alive, then Complete with its output or Fail with the disposition its error chooses.
//!   Replays, in-flight duplicates, final failures and unknown outcomes come back typed.
//! - [`Client::saga`] … [`Saga::step`]: a saga whose steps are child operations run once each,
//!   with compensations run once each in reverse order when a step fails for good; a saga whose
//!   process died resumes from the ledger when started again with the same key.
//! - [`Client::claim`], [`Client::complete`], [`Client::fail`] (and [`Client::release_unused`]
//!   for a lease under which nothing ran), [`Client::renew`],
//!   [`Client::lookup`], [`Client::keep_alive`], [`Client::list_records`]: one typed method per
//!   RPC, with the typed [`Error`] (gRPC code and `ErrorInfo` [`Reason`]);
//!   [`Client::list_all`] walks a listing page by page. [`Claim`] also asks for an approval gate
//!   ([`Claim::require_approval`]), a dry run ([`Claim::dry_run`]) or an attempt cap
//!   ([`Claim::max_attempts`]); the operator's [`Client::approve`], [`Client::reject`] and
//!   [`Client::purge`] decide and clean up.
//! - Every unary call goes through tower layers ([`stack`]): a per-attempt timeout, retries of
//!   transient failures with exponential backoff and full jitter (honoring
//!   `grpc-retry-pushback-ms`), and a circuit breaker. A retry resends the identical request.
//!
//! ```no_run
//! use oncekey_client::{Client, ConnectOptions, Disposition, Failure, OnceError, OperationKey};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize)]
//! struct Charge<'a> { order: &'a str, amount_cents: u64, currency: &'a str }
//!
//! #[derive(Serialize, Deserialize)]
//! struct Receipt { charge_id: String }
//!
//! #[derive(Debug)]
//! struct Declined;
//! impl std::fmt::Display for Declined {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("card declined")
//!     }
//! }
//! impl Failure for Declined {
//!     fn disposition(&self) -> Disposition { Disposition::Final }
//! }
//!
//! # async fn provider_charge(_: &str, _: u64, _: u64) -> Result<String, Declined> { Ok("ch_1".into()) }
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(
//!     "http://127.0.0.1:50051",
//!     ConnectOptions { token: std::env::var("ONCEKEY_TOKEN").ok(), ..Default::default() },
//! )
//! .await?;
//!
//! // The same order always gives the same key and the same arguments.
//! let key = OperationKey::new("payments.charge", ["order-1042", "charge", "v1"])?;
//! let args = Charge { order: "order-1042", amount_cents: 1999, currency: "EUR" };
//!
//! let receipt: Result<Receipt, OnceError<Declined>> = client
//!     .once(&key, &args)
//!     .run(|lease| async move {
//!         // Runs only if no earlier attempt succeeded; the lease is renewed meanwhile.
//!         let charge_id = provider_charge("order-1042", 1999, lease.fencing_token()).await?;
//!         Ok(Receipt { charge_id })
//!     })
//!     .await;
//! match receipt {
//!     Ok(r) => println!("charged: {}", r.charge_id), // now, or replayed from the first run
//!     Err(OnceError::Operation(Declined)) | Err(OnceError::Failed(_)) => println!("declined"),
//!     Err(e) => return Err(e.into()),
//! }
//! # Ok(())
//! # }
//! ```

pub use oncekey_api as api;
pub use oncekey_api::fingerprint;

mod arguments;
mod connect;
mod credentials;
mod error;
mod key;
mod lease;
mod list;
mod once;
mod operations;
mod rpc;
mod safety;
mod saga;
pub mod stack;
pub mod transport;
mod types;

pub use arguments::{default_arguments, default_key};
pub use connect::{
    Client, ClientError, ConnectOptions, TlsOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT,
};
pub use credentials::{Credentials, LedgerRpc};
pub use error::{Error, Reason, RETRY_PUSHBACK_HEADER};
pub use key::{KeyBuilder, KeyError, OperationKey, MAX_KEY_BYTES};
pub use lease::{KeepAliveGuard, Lease};
pub use list::{ListRecords, Pager, RecordPage, MAX_PAGE_SIZE};
pub use once::{Done, Failure, Once, OnceError, DEFAULT_WAIT_TIMEOUT};
pub use rpc::{Arguments, Claim, KeepAlive, MAX_WAIT};
pub use safety::{BudgetUsage, IntentGuard, IntentMatch, RunBudget};
pub use saga::{Cause, Saga, SagaBuilder, SagaError, SagaStart, DEFAULT_SAGA_RETENTION};
pub use stack::{BreakerPolicy, CircuitState, RetryPolicy, Stats};
pub use types::{
    Approval, Claimed, Decision, Disposition, LeaseGrant, Outcome, Record, RecordStatus, Semantics,
    StoredError, StoredResult,
};
