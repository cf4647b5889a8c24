//! The spending limits of a run and of a session (crush(1) USAGE AND COST, Budget): checked from the ledger
//! before each model call, so each priced answer (a sub-agent's included) counts before the
//! next call is made.

use super::{Agent, AgentError, Stop};
use std::fmt;

/// The limits in USD; None: no limit of that kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Budget {
    /// What one run may spend (`--max-cost`, `options.max_cost`).
    pub run: Option<f64>,
    /// What the session may have spent in all, across runs and resumes
    /// (`options.max_session_cost`).
    pub session: Option<f64>,
    /// An unpriced model may be called under the budget (`--max-cost-unpriced allow`).
    pub allow_unpriced: bool,
    /// The session's spend when the run began: the run's spend is counted from it.
    pub start: f64,
    /// The user let this turn go past the limit (the REPL asks): no check until the next turn.
    pub waived: bool,
}

/// Which limit stopped the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Run,
    Session,
}

/// Why the budget stopped a turn before a model call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BudgetStop {
    /// The limit is reached: `spent` of `limit` USD; `step` is the call that was not made.
    Reached {
        limit: Limit,
        spent: f64,
        max: f64,
        step: usize,
    },
    /// The model has no price, so its calls cannot be counted against dollars.
    Unpriced { model: String },
}

impl fmt::Display for BudgetStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetStop::Reached {
                limit,
                spent,
                max,
                step,
            } => {
                let (what, key) = match limit {
                    Limit::Run => ("this run", "--max-cost / options.max_cost"),
                    Limit::Session => ("this session", "options.max_session_cost"),
                };
                write!(
                    f,
                    "budget reached: {what} has spent ${spent:.4} of its ${max:.4} ({key}); \
                     model call {step} of the turn was not made"
                )
            }
            BudgetStop::Unpriced { model } => write!(
                f,
                "the model {model} has no price, so its calls cannot be counted against the \
                 budget; nothing was sent (allow it with --max-cost-unpriced allow)"
            ),
        }
    }
}

/// A limit that is not a number of dollars: where it was set and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadLimit {
    pub place: String,
    pub key: &'static str,
    pub value: f64,
}

impl fmt::Display for BadLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: options.{} must be a number of US dollars, 0 or more (got {})",
            self.place, self.key, self.value
        )
    }
}

impl std::error::Error for BadLimit {}

/// Whether `v` can be a limit in dollars.
pub(crate) fn valid_limit(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

impl Budget {
    /// The budget of a run: `max_cost` (`--max-cost`) else `options.max_cost`, and
    /// `options.max_session_cost`, counted from the session's spend `start`.
    pub(crate) fn for_run(
        loaded: &crate::config::Loaded,
        max_cost: Option<f64>,
        allow_unpriced: bool,
        start: f64,
    ) -> Result<Budget, BadLimit> {
        let options = &loaded.config.options;
        let checked = |key: &'static str, v: Option<f64>| match v {
            Some(value) if !valid_limit(value) => Err(BadLimit {
                place: loaded.origin_of(&["options", key]),
                key,
                value,
            }),
            v => Ok(v),
        };
        let run = checked("max_cost", options.max_cost)?;
        Ok(Budget {
            run: max_cost.or(run),
            session: checked("max_session_cost", options.max_session_cost)?,
            allow_unpriced,
            start,
            waived: false,
        })
    }

    /// Whether any limit is set.
    pub(crate) fn is_set(&self) -> bool {
        self.run.is_some() || self.session.is_some()
    }

    /// The stop for a session that has spent `spent` in all, before model call `step`.
    pub(crate) fn check(&self, spent: f64, step: usize) -> Option<BudgetStop> {
        let over = |limit, spent: f64, max: Option<f64>| {
            max.filter(|&m| spent >= m).map(|max| BudgetStop::Reached {
                limit,
                spent,
                max,
                step,
            })
        };
        over(Limit::Session, spent, self.session)
            .or_else(|| over(Limit::Run, (spent - self.start).max(0.0), self.run))
    }
}

impl Agent {
    /// The budget's stop before model call `step` of a turn, if any (crush(1) USAGE AND COST,
    /// Budget): one read of the top-level session's recorded cost, which includes its
    /// sub-agents'. Where the sink can ask (the REPL), the user may let the turn go over the
    /// limit, or call an unpriced model, instead.
    pub(super) fn budget_stop(
        &mut self,
        step: usize,
        sink: &mut dyn super::Sink,
    ) -> Result<Option<Stop>, AgentError> {
        let Some(b) = self.policy.budget.as_ref().filter(|b| b.is_set()) else {
            return Ok(None);
        };
        let stop = if !b.allow_unpriced && !self.model.is_priced() {
            BudgetStop::Unpriced {
                model: format!("{}/{}", self.model.provider.id, self.model.model.id),
            }
        } else if b.waived {
            return Ok(None);
        } else {
            let spent = self.session.store.session_spend(&self.session.id)?;
            match b.check(spent, step) {
                Some(stop) => stop,
                None => return Ok(None),
            }
        };
        if !sink.can_ask() || !sink.go_over_budget(&stop) {
            return Ok(Some(Stop::Budget(stop)));
        }
        if let Some(b) = self.policy.budget.as_mut() {
            match stop {
                BudgetStop::Unpriced { .. } => b.allow_unpriced = true,
                BudgetStop::Reached { .. } => b.waived = true,
            }
        }
        Ok(None)
    }

    /// A new turn is checked against the budget again, whatever the last one was let do.
    pub(super) fn rearm_budget(&mut self) {
        if let Some(b) = self.policy.budget.as_mut() {
            b.waived = false;
        }
    }

    /// The limit the status line shows: what the session may have spent in all when the next
    /// check is made (the tighter of the two limits), if a budget is set.
    pub(crate) fn budget_ceiling(&self) -> Option<f64> {
        let b = self.policy.budget.as_ref().filter(|b| b.is_set())?;
        let run = b.run.map(|r| b.start + r);
        match (run, b.session) {
            (Some(r), Some(s)) => Some(r.min(s)),
            (r, s) => r.or(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_limit_counts_everything_and_the_run_limit_from_its_start() {
        let b = Budget {
            run: Some(0.01),
            session: Some(1.0),
            allow_unpriced: false,
            start: 0.5,
            waived: false,
        };
        assert_eq!(b.check(0.509, 2), None);
        let Some(BudgetStop::Reached {
            limit, spent, step, ..
        }) = b.check(0.51, 3)
        else {
            panic!("over the run's limit")
        };
        assert_eq!((limit, step), (Limit::Run, 3));
        assert!((spent - 0.01).abs() < 1e-9);
        assert!(matches!(
            b.check(1.0, 1),
            Some(BudgetStop::Reached {
                limit: Limit::Session,
                ..
            })
        ));
        assert_eq!(Budget::default().check(1e9, 1), None);
        let text = b.check(2.0, 4).unwrap().to_string();
        assert!(text.contains("$2.0000 of its $1.0000"), "{text}");
        assert!(text.contains("model call 4"), "{text}");
    }
}
