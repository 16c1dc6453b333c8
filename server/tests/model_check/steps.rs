//! The model's steps: the real state machine applied to the model store, and what each client
//! learns from an answer.

use super::*;

impl Ledger {
    pub(super) fn now(&self, s: &State) -> Millis {
        Millis::from(s.tick) * TICK
    }

    pub(super) fn horizon(&self) -> Millis {
        Millis::from(self.max_ticks) * TICK
    }

    pub(super) fn args(&self, client: usize, reconcile: bool) -> ClaimArgs {
        ClaimArgs {
            fingerprint: [7; 32],
            lease_ttl: LEASE,
            retention: RETENTION,
            semantics: self.semantics,
            owner: format!("client-{client}"),
            parent: None,
            reconcile,
        }
    }

    /// Clears what the state machine never branches on (see the module doc).
    pub(super) fn normalize(&self, s: &mut State, mut r: Record) -> Stored {
        if r.expires_at != FAR && r.expires_at <= self.horizon() {
            s.expiry_beyond_horizon = false;
        }
        r.expires_at = FAR;
        r.history.clear();
        r.dedup_hits = 0;
        r.created_at = 0;
        r.updated_at = 0;
        r.lease_owner.clear();
        Stored(r)
    }

    /// The real state machine on `current` at `now`: the transition and the client's answer.
    pub(super) fn decide(
        &self,
        s: &State,
        client: usize,
        req: Req,
        current: Option<&Record>,
        now: Millis,
    ) -> Result<(Transition, Answer), LedgerError> {
        match req {
            Req::Claim { reconcile } => {
                let d = ledger::claim(&id(), current, &self.args(client, reconcile), now)?;
                let r = d.record();
                let answer = Answer::Claimed {
                    outcome: d.outcome,
                    token: r.fencing_token,
                    lease_end: r.lease().expires_at,
                    result_code: r.result.as_ref().map(|x| x.code),
                };
                Ok((d.transition, answer))
            }
            Req::Settle { token, settle } => {
                let t = match settle {
                    Settle::Complete { performer } => {
                        ledger::complete(current, token, &result(performer), now)?
                    }
                    Settle::Fail(d) => ledger::fail(current, token, &error(client), d, now)?,
                };
                Ok((t, Answer::Settled))
            }
            Req::Renew { token } => {
                let (lease, t) = ledger::renew(current, token, LEASE, now)?;
                let _ = s;
                Ok((
                    t,
                    Answer::Renewed {
                        lease_end: lease.expires_at,
                    },
                ))
            }
        }
    }

    /// One engine round for `client`: decide on the record read, then write conditionally.
    pub(super) fn step_read(&self, s: &mut State, client: usize, req: Req, read: Option<Stored>) {
        let now = self.now(s);
        let current = read.as_ref().map(|r| &r.0);
        let (transition, answer) = match self.decide(s, client, req, current, now) {
            Ok(x) => x,
            Err(e) => {
                s.clients[client].rpc = Some((req, Stage::Answered(Answer::Refused(e.into()))));
                return;
            }
        };
        let live_version = s.live.as_ref().map(|r| r.0.version);
        let durable = match transition.change {
            Change::Keep => {
                s.clients[client].rpc = Some((req, Stage::Answered(answer)));
                return;
            }
            Change::Insert if live_version.is_none() => true,
            Change::Replace {
                expected_version,
                durable,
            } if live_version == Some(expected_version) => durable,
            // The condition failed: the store returns what it holds; decide again.
            Change::Insert | Change::Replace { .. } => {
                s.clients[client].rpc = Some((req, Stage::Read(s.live.clone())));
                return;
            }
        };
        let before = s.live.as_ref().map(|r| r.0.clone());
        let next = transition.record.expect("a write carries its record");
        self.observe_write(s, client, req, before.as_ref(), &next, &answer);
        let stored = self.normalize(s, next);
        s.live = Some(stored);
        if durable {
            s.durable = s.live.clone();
        }
        s.clients[client].rpc = Some((req, Stage::Answered(answer)));
    }

    /// Ghost bookkeeping when a write applies.
    pub(super) fn observe_write(
        &self,
        s: &mut State,
        client: usize,
        req: Req,
        before: Option<&Record>,
        next: &Record,
        answer: &Answer,
    ) {
        let _ = client;
        if let Answer::Claimed {
            outcome: ClaimOutcome::Acquired,
            token,
            ..
        } = answer
        {
            if *token <= s.last_acquired_token {
                s.acquisitions_ok = false;
            }
            s.last_acquired_token = *token;
            match before.map(|r| r.status) {
                Some(Status::Processing) if !matches!(req, Req::Claim { reconcile: true }) => {
                    s.seen.takeover = true
                }
                Some(Status::Abandoned) => s.seen.reclaimed_after_abandon = true,
                _ => {}
            }
        }
        if next.status == Status::Succeeded && before.map(|r| r.status) != Some(Status::Succeeded) {
            let code = next.result.as_ref().map_or(-1, |x| x.code);
            match s.success {
                None => s.success = Some((code, next.fencing_token)),
                Some((_, token)) if token != next.fencing_token => s.one_completer = false,
                Some(_) => {}
            }
            s.seen.succeeded = true;
            if matches!(
                s.clients[client].phase,
                Phase::Holding {
                    reconciling: true,
                    effect: false,
                    ..
                }
            ) {
                s.seen.reconciled_completed = true;
            }
        }
    }

    /// The client reads its answer and moves on.
    pub(super) fn deliver(&self, s: &mut State, client: usize, req: Req, answer: Answer) {
        let c = &mut s.clients[client];
        c.rpc = None;
        match (req, answer) {
            (
                Req::Claim { reconcile },
                Answer::Claimed {
                    outcome,
                    token,
                    lease_end,
                    result_code,
                },
            ) => match outcome {
                ClaimOutcome::Acquired => {
                    c.phase = Phase::Holding {
                        token,
                        lease_end,
                        reconciling: reconcile,
                        effect: false,
                        settle: None,
                    }
                }
                ClaimOutcome::Completed => {
                    if result_code != s.success.map(|(code, _)| code) {
                        s.replays_ok = false;
                    }
                    c.phase = Phase::Done;
                }
                ClaimOutcome::Failed => c.phase = Phase::Done,
                ClaimOutcome::InProgress => c.phase = Phase::Idle { reconcile: false },
                ClaimOutcome::NeedsReconciliation => {
                    s.seen.needs_reconciliation = true;
                    c.phase = Phase::Idle { reconcile: true };
                }
            },
            (Req::Settle { settle, .. }, Answer::Settled) => {
                c.phase = match settle {
                    Settle::Fail(Disposition::Retryable) => Phase::Idle { reconcile: false },
                    _ => Phase::Done,
                }
            }
            (Req::Renew { .. }, Answer::Renewed { lease_end: end }) => {
                s.seen.renewed = true;
                if let Phase::Holding { lease_end, .. } = &mut c.phase {
                    *lease_end = end;
                }
            }
            (_, Answer::Refused(e)) => {
                if e == Refusal::LeaseLost {
                    s.seen.lease_lost = true;
                }
                // Lost or settled by someone else: an honest client stops acting on this lease.
                c.phase = Phase::Done;
            }
            (req, answer) => panic!("answer {answer:?} to {req:?}"),
        }
    }
}
