//! A recorded history: every client operation of a run with its invocation and response times
//! (client clock, Unix milliseconds), the server it went through and that server's clock skew,
//! what was asked and what came back — or that nothing came back, so it may or may not have been
//! applied. Plain data, in the ledger's own types, for the linearizability checker.

use oncekey_server::ledger::{ClaimArgs, ClaimOutcome, Disposition, LedgerError, Millis};
use oncekey_server::ledger::{OpError, OpResult, Status};
use std::fmt;

/// One client operation on one key.
#[derive(Debug, Clone)]
pub struct Op {
    /// The key (within the run's namespace and tenant).
    pub key: String,
    /// The recording client.
    pub client: u32,
    /// Which Oncekey server handled it (index into the run's servers).
    pub server: usize,
    /// When the client sent it (client clock, before sending).
    pub invoke: Millis,
    /// When the answer came back, or when the client gave up (`Answer::Unknown`).
    pub ret: Millis,
    /// The least and greatest clock skew of that server while the operation was under way: its
    /// clock read `now + skew`.
    pub skew: (Millis, Millis),
    /// What was asked.
    pub call: Call,
    /// What came back.
    pub answer: Answer,
}

/// A request, in the ledger's terms.
#[derive(Debug, Clone)]
pub enum Call {
    /// Claim with these arguments.
    Claim(ClaimArgs),
    /// Complete with `token` and `result`.
    Complete {
        /// The lease token.
        token: u64,
        /// The result sent.
        result: OpResult,
    },
    /// Fail with `token`.
    Fail {
        /// The lease token.
        token: u64,
        /// The error sent.
        error: OpError,
        /// RETRYABLE or FINAL (ABANDON is not recorded: it deletes the record).
        disposition: Disposition,
    },
    /// Renew `token` for `lease_ttl`.
    Renew {
        /// The lease token.
        token: u64,
        /// The new lease length.
        lease_ttl: Millis,
    },
    /// Lookup.
    Lookup,
}

/// A record as an answer showed it: the fields the ledger's single-record model decides on.
/// Dedup counters and receipts are left out on purpose: dedup hits are written off the answer
/// path (a crash may lose them), so they are not part of the linearizable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Status.
    pub status: Status,
    /// Current fencing token.
    pub token: u64,
    /// Acquisitions so far.
    pub attempt: u32,
    /// Who holds (or last held) the lease: tells which client's Claim acquired it.
    pub owner: String,
    /// End of the current lease.
    pub lease_expires_at: Option<Millis>,
    /// Stored result.
    pub result: Option<OpResult>,
    /// Stored error.
    pub error: Option<OpError>,
}

/// What came back.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A Claim's answer: its outcome, the record, and the lease (token, end) when ACQUIRED.
    Claimed {
        /// The outcome.
        outcome: ClaimOutcome,
        /// The record in the answer.
        record: Seen,
        /// (token, expires_at) when ACQUIRED.
        lease: Option<(u64, Millis)>,
    },
    /// Complete or Fail accepted: the record after it.
    Settled(Seen),
    /// Renew accepted: the lease's new end.
    Renewed {
        /// The lease's new end.
        expires_at: Millis,
    },
    /// Lookup: the record, or none (NOT_FOUND).
    Found(Option<Seen>),
    /// Refused with a definite reason: nothing changed.
    Refused(LedgerError),
    /// No definite answer (timeout, UNAVAILABLE, broken connection): the operation may have been
    /// applied, at any point after its invocation, or never.
    Unknown(String),
}

impl Answer {
    /// Whether the answer is definite.
    pub fn is_known(&self) -> bool {
        !matches!(self, Answer::Unknown(_))
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} t{} a{} {}",
            self.status, self.token, self.attempt, self.owner
        )?;
        if let Some(end) = self.lease_expires_at {
            write!(f, " lease..{}", end % 100_000)?;
        }
        if let Some(r) = &self.result {
            write!(f, " result={}", String::from_utf8_lossy(&r.body))?;
        }
        if let Some(e) = &self.error {
            write!(f, " error={}", e.message)?;
        }
        Ok(())
    }
}

impl fmt::Display for Op {
    /// One line: client, server, times (last five digits of the milliseconds), call, answer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ret = if self.answer.is_known() {
            format!("{:05}", self.ret % 100_000)
        } else {
            format!("({:05})", self.ret % 100_000)
        };
        write!(
            f,
            "c{}@s{} [{:05}..{ret}] skew{:?} ",
            self.client,
            self.server,
            self.invoke % 100_000,
            self.skew
        )?;
        match &self.call {
            Call::Claim(a) => write!(
                f,
                "Claim(ttl {} {:?}{})",
                a.lease_ttl,
                a.semantics,
                if a.reconcile { " reconcile" } else { "" }
            )?,
            Call::Complete { token, .. } => write!(f, "Complete(t{token})")?,
            Call::Fail {
                token, disposition, ..
            } => write!(f, "Fail(t{token} {disposition:?})")?,
            Call::Renew { token, lease_ttl } => write!(f, "Renew(t{token} ttl {lease_ttl})")?,
            Call::Lookup => write!(f, "Lookup")?,
        }
        match &self.answer {
            Answer::Claimed {
                outcome, record, ..
            } => write!(f, " -> {outcome:?}: {record}"),
            Answer::Settled(r) => write!(f, " -> OK: {r}"),
            Answer::Renewed { expires_at } => write!(f, " -> lease..{}", expires_at % 100_000),
            Answer::Found(Some(r)) => write!(f, " -> {r}"),
            Answer::Found(None) => write!(f, " -> NOT_FOUND"),
            Answer::Refused(e) => write!(f, " -> {e:?}"),
            Answer::Unknown(why) => write!(f, " -> ??? {why}"),
        }
    }
}
