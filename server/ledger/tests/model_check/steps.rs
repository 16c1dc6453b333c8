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
            retention: self.retention,
            semantics: self.semantics,
            owner: format!("client-{client}"),
            parent: None,
            reconcile,
            // Only client 0 asks: a later Claim without it must not open the gate.
            require_approval: self.require_approval && client == 0,
            max_attempts: self.max_attempts,
            budget: None,
        }
    }

    /// Clears what the state machine never branches on (see the module doc); under `Rule::Old`,
    /// sets `expires_at` the old way. `before` is the stored record `r` replaces, if any.
    pub(super) fn normalize(&self, before: Option<&Record>, mut r: Record, now: Millis) -> Stored {
        if self.rule == Rule::Old {
            r.expires_at = Some(self.old_expiry(before, &r, now));
        }
        if self.rule == Rule::PurgeForgetsLease && r.status == Status::Purged {
            r.expires_at = Some(now + self.retention);
        }
        if self.rule == Rule::AbandonForgetsGate && r.status == Status::Abandoned {
            r.require_approval = false;
        }
        if let Some(a) = r.approval.as_mut() {
            a.decided_at = 0;
        }
        r.expires_at = r.expires_at.map(|at| self.clip(at));
        r.history.clear();
        r.dedup_hits = 0;
        // (Expiry reads `created_at` while the record awaits approval or is approved.)
        if !matches!(r.status, Status::AwaitingApproval | Status::Approved) {
            r.created_at = 0;
        }
        r.updated_at = 0;
        r.lease_owner.clear();
        Stored(r)
    }

    /// `at`, or `FAR` when it lies beyond the horizon (the clock never gets there).
    pub(super) fn clip(&self, at: Millis) -> Millis {
        if at > self.horizon() {
            FAR
        } else {
            at
        }
    }

    /// The expiry rule before expiry by state: `retention` after the record was created, acquired
    /// or settled, and never before its lease ends.
    fn old_expiry(&self, before: Option<&Record>, next: &Record, now: Millis) -> Millis {
        let kept = now + self.retention;
        let with_lease = |at: Millis| next.lease_expires_at.map_or(at, |end| at.max(end));
        let Some(before) = before.filter(|b| !b.is_expired(now) && b.status != Status::Abandoned)
        else {
            return with_lease(kept); // created (or created again over a tombstone)
        };
        let before_at = before.expires_at.expect("the old rule always sets one");
        let settled = |st| {
            matches!(
                st,
                Status::Succeeded | Status::Failed | Status::Retry | Status::Abandoned
            )
        };
        if next.fencing_token != before.fencing_token {
            with_lease(kept).max(before_at) // acquired
        } else if settled(next.status) && next.status != before.status {
            kept
        } else if next.lease_expires_at != before.lease_expires_at {
            with_lease(before_at) // renewed
        } else {
            before_at
        }
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
        // The store's conditions: an expired record counts as absent.
        let live = s
            .live
            .as_ref()
            .map(|r| &r.0)
            .filter(|r| !r.is_expired(now))
            .cloned();
        let durable = match transition.change {
            Change::Keep => {
                s.clients[client].rpc = Some((req, Stage::Answered(answer)));
                return;
            }
            Change::Insert if live.is_none() => true,
            Change::Replace {
                expected_version,
                durable,
            } if live.as_ref().map(|r| r.version) == Some(expected_version) => durable,
            // The condition failed: the store returns what it holds; decide again.
            Change::Insert | Change::Replace { .. } => {
                s.clients[client].rpc = Some((req, Stage::Read(s.live.clone())));
                return;
            }
        };
        if transition.change == Change::Insert {
            if let Some(Stored(expired)) = s.live.clone() {
                self.new_life(s, &expired, now);
            }
            // Only needed when the clock can run past the retention (see `sent`).
            s.life_started = if self.retention < self.horizon() {
                now
            } else {
                0
            };
        }
        let next = transition.record.expect("a write carries its record");
        self.observe_write(s, client, req, live.as_ref(), &next, &answer, now);
        let stored = self.normalize(live.as_ref(), next, now);
        s.live = Some(stored);
        if durable {
            s.durable = s.live.clone();
        }
        s.clients[client].rpc = Some((req, Stage::Answered(answer)));
    }

    /// A Claim created the record again over `expired`: checks that it was allowed to expire,
    /// and starts the ghost state of a new operation.
    fn new_life(&self, s: &mut State, expired: &Record, now: Millis) {
        s.seen.reclaimed_after_expiry = true;
        let unsettled = matches!(expired.status, Status::Processing | Status::Unknown);
        if unsettled {
            let lease_end = expired.lease_expires_at.unwrap_or(0);
            if now < lease_end + self.retention {
                s.unsettled_kept = false;
            }
            if expired.semantics == Semantics::AtMostOnce {
                s.at_most_once_kept = false;
            }
        } else {
            // A settled operation expired: the key is a new operation, and its effect may run
            // again. The effects of one that never settled keep counting.
            s.effects = 0;
            s.performer = None;
        }
        s.success = None;
        s.last_effect_token = 0;
        s.last_acquired_token = 0;
        s.fenced_upto = 0;
    }

    /// Whether the operator may purge now: a live record (not a tombstone); an unsettled
    /// at-most-once one only once its lease lapsed (the documented rule: its holder is gone).
    pub(super) fn may_purge(&self, s: &State, now: Millis) -> bool {
        let Some(Stored(r)) = &s.live else {
            return false;
        };
        if r.is_expired(now) || r.status.is_tombstone() {
            return false;
        }
        let unsettled = matches!(r.status, Status::Processing | Status::Unknown);
        r.semantics == Semantics::AtLeastOnce || !unsettled || r.lease_expired(now)
    }

    /// The operator's Purge (with force), applied at once: the record becomes a Purge tombstone;
    /// the key is a new operation whose tokens continue the purged record's.
    pub(super) fn purge(&self, s: &mut State) {
        let now = self.now(s);
        let current = s.live.as_ref().map(|r| r.0.clone());
        let transition = ledger::purge(current.as_ref(), true, now).expect("a purgeable record");
        let next = transition.record.expect("a tombstone");
        let token = next.fencing_token;
        s.live = Some(self.normalize(current.as_ref(), next, now));
        s.durable = s.live.clone();
        s.purges_left -= 1;
        s.seen.purged = true;
        s.fenced_upto = token;
        s.effects = 0;
        s.performer = None;
        s.success = None;
        s.ordinary = 0;
        if self.retention < self.horizon() {
            s.life_started = now;
        }
    }

    /// The operator's Approve or Reject of the record awaiting approval, applied at once.
    pub(super) fn decide_approval(&self, s: &mut State, decision: Decision) {
        let now = self.now(s);
        let current = s.live.as_ref().map(|r| r.0.clone());
        let decided = match decision {
            Decision::Approved => ledger::approve(current.as_ref(), None, "operator", "", now),
            Decision::Rejected => ledger::reject(current.as_ref(), None, "operator", "no", now),
        };
        let next = decided
            .expect("a record awaiting approval")
            .record
            .expect("a decision is written");
        if decision == Decision::Approved {
            s.approved = true;
        }
        s.live = Some(self.normalize(current.as_ref(), next, now));
        s.durable = s.live.clone();
    }

    /// Ghost bookkeeping when a write applies: `before` is the live record it replaces.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn observe_write(
        &self,
        s: &mut State,
        client: usize,
        req: Req,
        before: Option<&Record>,
        next: &Record,
        answer: &Answer,
        now: Millis,
    ) {
        if let Answer::Claimed {
            outcome: ClaimOutcome::Completed,
            result_code,
            ..
        } = answer
        {
            if *result_code != s.success.map(|(code, _)| code) {
                s.replays_ok = false;
            }
        }
        if let Answer::Claimed {
            outcome: ClaimOutcome::NeedsReconciliation,
            ..
        } = answer
        {
            if now >= s.life_started + LEASE + self.retention {
                s.seen.reconciliation_after_retention = true;
            }
            if next.semantics == Semantics::AtLeastOnce {
                s.seen.exhausted_unknown = true;
            }
        }
        if let Answer::Claimed {
            outcome: ClaimOutcome::Failed,
            ..
        } = answer
        {
            if next.error.as_ref().map(|e| e.code) == Some(ledger::EXHAUSTED_CODE) {
                s.seen.exhausted_failed = true;
            }
        }
        // A Claim on an absent key or over a tombstone starts an operation, which needs its own
        // approval (whatever the stored record says) when that Claim asks for one, or when it
        // follows an abandoned operation that needed one (only a purge clears the gate).
        if let (Req::Claim { reconcile }, true) =
            (req, before.is_none_or(|r| r.status.is_tombstone()))
        {
            let asks = self.args(client, reconcile).require_approval;
            let abandoned = before.is_some_and(|r| r.status == Status::Abandoned);
            s.gated = asks || (abandoned && s.gated);
            s.approved = false;
        }
        if let Answer::Claimed { outcome, .. } = answer {
            match outcome {
                ClaimOutcome::AwaitingApproval => {
                    s.seen.awaited = true;
                    if before.is_some_and(|r| r.status == Status::Abandoned) {
                        s.seen.gated_after_abandon = true;
                    }
                }
                ClaimOutcome::Failed
                    if next.error.as_ref().map(|e| e.code) == Some(ledger::REJECTED_CODE) =>
                {
                    s.seen.rejection_replayed = true;
                }
                ClaimOutcome::Acquired if s.gated && !s.approved => {
                    s.gate_ok = false;
                }
                ClaimOutcome::Acquired if before.is_some_and(|r| r.status == Status::Approved) => {
                    s.seen.acquired_after_approval = true;
                }
                _ => {}
            }
        }
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
            // The attempt cap counts the acquisitions of one life that are not reconciliations.
            let same_life = before.filter(|r| !r.status.is_tombstone());
            if same_life.is_none() {
                s.ordinary = 0;
            }
            if next.reconciliations == same_life.map_or(0, |r| r.reconciliations) {
                s.ordinary += 1;
                if self.max_attempts > 0 && s.ordinary > self.max_attempts {
                    s.cap_ok = false;
                }
            }
            if before.is_some_and(|r| r.status == Status::Purged) && *token > s.fenced_upto {
                s.seen.acquired_after_purge = true;
            }
            let held_elsewhere = s.clients.iter().enumerate().any(|(j, c)| {
                j != client
                    && matches!(c.phase, Phase::Holding { token: t, deadline, .. }
                        if t == *token && now < deadline)
            });
            if held_elsewhere {
                s.fencing_ok = false;
            }
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
        c.sent = 0;
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
                        deadline: self.clip(lease_end + self.retention),
                        reconciling: reconcile,
                        effect: false,
                        settle: None,
                    }
                }
                ClaimOutcome::Completed => {
                    // Checked when answered (`observe_write`): by now the record may have expired.
                    let _ = result_code;
                    c.phase = Phase::Done;
                }
                ClaimOutcome::Failed => c.phase = Phase::Done,
                ClaimOutcome::InProgress => c.phase = Phase::Idle { reconcile: false },
                // The client waits for the decision and claims again.
                ClaimOutcome::AwaitingApproval => c.phase = Phase::Idle { reconcile: false },
                // The ledger never answers it (the engine's intent guard does).
                ClaimOutcome::DuplicateIntent => unreachable!("the ledger refused an intent"),
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
                if let Phase::Holding {
                    lease_end,
                    deadline,
                    ..
                } = &mut c.phase
                {
                    *lease_end = end;
                    *deadline = self.clip((*deadline).max(end + self.retention));
                }
            }
            (_, Answer::Refused(e)) => {
                if e == Refusal::LeaseLost {
                    s.seen.lease_lost = true;
                    if matches!(req, Req::Settle { token, .. } | Req::Renew { token }
                        if token <= s.fenced_upto)
                    {
                        s.seen.lease_lost_after_purge = true;
                    }
                }
                // Lost or settled by someone else: an honest client stops acting on this lease.
                c.phase = Phase::Done;
            }
            (req, answer) => panic!("answer {answer:?} to {req:?}"),
        }
    }
}
