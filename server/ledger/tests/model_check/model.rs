//! The stateright `Model`: initial states, the actions each state allows, the next state of an
//! action, and the properties checked in every reachable state.

use super::*;

impl Model for Ledger {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            tick: 0,
            crashes: 0,
            claims_left: self.claims,
            renews_left: self.renews,
            live: None,
            durable: None,
            clients: vec![
                Client {
                    phase: Phase::Idle { reconcile: false },
                    rpc: None,
                    sent: 0,
                };
                self.clients
            ],
            effects: 0,
            last_effect_token: 0,
            performer: None,
            success: None,
            last_acquired_token: 0,
            effect_tokens_ok: true,
            acquisitions_ok: true,
            one_completer: true,
            replays_ok: true,
            fencing_ok: true,
            unsettled_kept: true,
            at_most_once_kept: true,
            life_started: 0,
            ordinary: 0,
            cap_ok: true,
            purges_left: self.purges,
            fenced_upto: 0,
            gated: false,
            approved: false,
            gate_ok: true,
            seen: Seen::default(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.tick < self.max_ticks {
            actions.push(Action::Tick);
        }
        if s.crashes < self.max_crashes && s.clients.iter().any(|c| c.rpc.is_some()) {
            actions.push(Action::Crash);
        }
        let now = self.now(s);
        if s.purges_left > 0 && self.may_purge(s, now) {
            actions.push(Action::Purge);
        }
        if matches!(&s.live, Some(Stored(r)) if r.status == Status::AwaitingApproval
            && !r.is_expired(now))
        {
            actions.push(Action::Decide(Decision::Approved));
            actions.push(Action::Decide(Decision::Rejected));
        }
        for (i, c) in s.clients.iter().enumerate() {
            if let Some((_, stage)) = &c.rpc {
                actions.push(match stage {
                    Stage::Answered(_) => Action::Deliver(i),
                    _ => Action::Step(i),
                });
                continue;
            }
            match c.phase {
                Phase::Idle { reconcile } if s.claims_left > 0 => {
                    actions.push(Action::Send(i, Req::Claim { reconcile }))
                }
                Phase::Idle { .. } | Phase::Done => {}
                Phase::Holding {
                    token,
                    lease_end,
                    deadline,
                    reconciling,
                    effect,
                    settle,
                } => {
                    actions.push(Action::GiveUp(i));
                    if now >= deadline {
                        // The record may be gone and its tokens handed out again: an honest
                        // client stops acting on this lease.
                        continue;
                    }
                    if let Some(settle) = settle {
                        // A settle whose answer was lost is resent unchanged.
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if reconciling && !effect && s.effects > 0 {
                        // The outside world shows the effect happened: record it.
                        let performer = s.performer.expect("an effect has a performer");
                        let settle = Settle::Complete { performer };
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if effect {
                        let settle = Settle::Complete { performer: i as u8 };
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if now < lease_end {
                        actions.push(Action::Effect(i));
                    }
                    if s.renews_left > 0 {
                        actions.push(Action::Send(i, Req::Renew { token }));
                    }
                    for d in [
                        Disposition::Retryable,
                        Disposition::Final,
                        Disposition::Abandon,
                    ] {
                        let settle = Settle::Fail(d);
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.tick += 1;
                let now = self.now(&s);
                for c in &mut s.clients {
                    if matches!(c.rpc, Some((_, Stage::Read(_)))) && now >= c.sent + self.retention
                    {
                        // Not applied in time: it never will be, and its client learns nothing.
                        c.rpc = None;
                        c.sent = 0;
                    }
                }
            }
            Action::Crash => {
                s.crashes += 1;
                s.live = s.durable.clone();
                for c in &mut s.clients {
                    c.sent = 0;
                    if let Some((_, Stage::Answered(answer))) = c.rpc.take() {
                        if !matches!(answer, Answer::Refused(_)) {
                            s.seen.crash_forgot_applied = true;
                        }
                    }
                }
            }
            Action::Send(i, req) => {
                let now = self.now(&s);
                let c = &mut s.clients[i];
                match (&mut c.phase, req) {
                    (_, Req::Claim { .. }) => s.claims_left -= 1,
                    (
                        Phase::Holding {
                            settle, deadline, ..
                        },
                        Req::Settle { settle: chosen, .. },
                    ) => {
                        if settle.is_none() {
                            *deadline = self.clip((*deadline).min(now + self.retention));
                        }
                        *settle = Some(chosen)
                    }
                    (Phase::Holding { .. }, Req::Renew { .. }) => s.renews_left -= 1,
                    _ => unreachable!(),
                }
                // Received and read at once (a request waiting to be read is no different from
                // one not sent yet, except that a crash drops it: covered by dropping later stages).
                c.rpc = Some((req, Stage::Read(s.live.clone())));
                // Only a retention within the horizon can run out (the state space stays that of
                // a model without the field otherwise).
                c.sent = if self.retention < self.horizon() {
                    now
                } else {
                    0
                };
            }
            Action::Effect(i) => {
                let Phase::Holding { token, effect, .. } = &mut s.clients[i].phase else {
                    unreachable!()
                };
                *effect = true;
                if *token <= s.fenced_upto {
                    // A purged holder's effect: downstream fencing rejects it (a later holder's
                    // token is higher), so nothing happens outside.
                    return Some(s);
                }
                if *token <= s.last_effect_token {
                    s.effect_tokens_ok = false;
                }
                s.last_effect_token = *token;
                s.effects += 1;
                s.performer = Some(i as u8);
            }
            Action::GiveUp(i) => s.clients[i].phase = Phase::Done,
            Action::Step(i) => {
                let (req, stage) = s.clients[i].rpc.clone().expect("an rpc");
                match stage {
                    Stage::Read(read) => self.step_read(&mut s, i, req, read),
                    Stage::Answered(_) => unreachable!(),
                }
            }
            Action::Deliver(i) => {
                let Some((req, Stage::Answered(answer))) = s.clients[i].rpc.clone() else {
                    unreachable!()
                };
                self.deliver(&mut s, i, req, answer);
            }
            Action::Purge => self.purge(&mut s),
            Action::Decide(decision) => self.decide_approval(&mut s, decision),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always(
                "effects ran under strictly increasing tokens",
                |_, s: &State| s.effect_tokens_ok,
            ),
            Property::always(
                "at most one holder's Complete is accepted",
                |_, s: &State| s.one_completer,
            ),
            Property::always("a SUCCEEDED result never changes", |_, s: &State| {
                s.success.is_none_or(|(code, _)| {
                    holds_result(&s.live, code) && holds_result(&s.durable, code)
                })
            }),
            Property::always("replays carry the stored result", |_, s: &State| {
                s.replays_ok
            }),
            Property::always("acquisition tokens strictly increase", |_, s: &State| {
                s.acquisitions_ok
            }),
            Property::always(FENCING, |_, s: &State| s.fencing_ok),
            Property::always(
                "no unsettled record expires within retention after its lease end",
                |_, s: &State| s.unsettled_kept,
            ),
            Property::sometimes("SUCCEEDED", |_, s: &State| s.seen.succeeded),
            Property::sometimes("a stale holder refused with LEASE_LOST", |_, s: &State| {
                s.seen.lease_lost
            }),
        ];
        if !self.require_approval {
            // (Behind the gate, a Claim after ABANDON awaits approval: see below.)
            p.push(Property::sometimes(
                "a key claimed again after ABANDON",
                |_, s: &State| s.seen.reclaimed_after_abandon,
            ));
        }
        if self.max_crashes > 0 {
            p.push(Property::sometimes(
                "an applied request forgotten by a crash",
                |_, s: &State| s.seen.crash_forgot_applied,
            ));
        }
        if self.renews > 0 {
            p.push(Property::sometimes("a lease renewed", |_, s: &State| {
                s.seen.renewed
            }));
        }
        if self.max_attempts > 0 {
            p.push(Property::always(
                "acquisitions that are not reconciliations never exceed the attempt cap",
                |_, s: &State| s.cap_ok,
            ));
            p.push(Property::sometimes(
                "the attempt cap failed an operation (429)",
                |_, s: &State| s.seen.exhausted_failed,
            ));
            if self.semantics == Semantics::AtLeastOnce {
                p.push(Property::sometimes(
                    "the attempt cap sent a lapsed lease to reconciliation",
                    |_, s: &State| s.seen.exhausted_unknown,
                ));
            }
        }
        if self.require_approval {
            p.push(Property::always(GATE, |_, s: &State| s.gate_ok));
            p.push(Property::sometimes(
                "a Claim answered AWAITING_APPROVAL",
                |_, s: &State| s.seen.awaited,
            ));
            p.push(Property::sometimes(
                "an approved operation acquired",
                |_, s: &State| s.seen.acquired_after_approval,
            ));
            p.push(Property::sometimes(
                "a rejected operation replayed as FAILED 403",
                |_, s: &State| s.seen.rejection_replayed,
            ));
            p.push(Property::sometimes(
                "an approved and abandoned operation awaits approval again",
                |_, s: &State| s.seen.gated_after_abandon,
            ));
        }
        if self.purges > 0 {
            p.push(Property::sometimes("a record purged", |_, s: &State| {
                s.seen.purged
            }));
            p.push(Property::sometimes(
                "a purged holder refused with LEASE_LOST",
                |_, s: &State| s.seen.lease_lost_after_purge,
            ));
            p.push(Property::sometimes(
                "a higher token handed out after a purge",
                |_, s: &State| s.seen.acquired_after_purge,
            ));
        }
        if self.retention < self.horizon() {
            p.push(Property::sometimes(
                "a key claimed again after its record expired",
                |_, s: &State| s.seen.reclaimed_after_expiry,
            ));
        }
        if self.semantics == Semantics::AtMostOnce {
            p.push(Property::always(
                "AT_MOST_ONCE: the effect ran at most once",
                |_, s: &State| s.effects <= 1,
            ));
            p.push(Property::always(
                "AT_MOST_ONCE: an unsettled record never expires",
                |_, s: &State| s.at_most_once_kept,
            ));
            if self.retention < self.horizon() {
                p.push(Property::sometimes(
                    "NEEDS_RECONCILIATION after the retention the record started with",
                    |_, s: &State| s.seen.reconciliation_after_retention,
                ));
            }
            p.push(Property::sometimes(
                "NEEDS_RECONCILIATION",
                |_, s: &State| s.seen.needs_reconciliation,
            ));
            p.push(Property::sometimes(
                "a reconciler completed what a vanished holder did",
                |_, s: &State| s.seen.reconciled_completed,
            ));
        } else if self.max_attempts == 0 {
            // (A cap of one allows no takeover, and so no second effect.)
            p.push(Property::sometimes(
                "a takeover of an expired lease",
                |_, s: &State| s.seen.takeover,
            ));
            p.push(Property::sometimes(
                "the effect ran twice (at least once)",
                |_, s: &State| s.effects >= 2,
            ));
        }
        p
    }
}
