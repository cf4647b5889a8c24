//! Read-only sums over the `usage` ledger for `crush stats`: in total, per model and per
//! top-level session (a sub-agent's calls count under the session that started it, once).
//!
//! Everything is summed from `usage` rows, never from `sessions` columns, so the figures are
//! what a third-party ledger reading the same table would get. Spend another client (Go Crush)
//! recorded only in `sessions` columns is reported apart, as not itemized.

use super::{Result, Store};
use rusqlite::Row;

/// Sums over a set of usage rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    /// Model calls (usage rows).
    pub calls: i64,
    /// Token sums over the calls whose usage is known.
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    /// Calls for which the provider reported no usage (NULL token columns).
    pub unknown_usage_calls: i64,
    /// Of those, calls crush estimated for the context meter (`price_source` estimated).
    pub estimated_calls: i64,
    /// Calls with a cost.
    pub priced_calls: i64,
    /// Calls without a cost (NULL): unpriced model, flat-rate provider, or unknown usage.
    pub unpriced_calls: i64,
    /// USD over the priced calls only; meaningless when `priced_calls` is 0.
    pub cost: f64,
}

/// Which usage rows a report sums (crush(1) USAGE AND COST): all of them by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Filter {
    /// Rows recorded at or after this Unix time.
    pub since: Option<i64>,
    /// Rows recorded before this Unix time.
    pub until: Option<i64>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

impl Filter {
    /// The condition on `u` (a usage row) and its parameters.
    fn usage_where(&self) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value as V;
        let mut clauses = vec!["1".to_string()];
        let mut params = Vec::new();
        let mut add = |clause: &str, v: V| {
            params.push(v);
            clauses.push(format!("{clause} ?{}", params.len()));
        };
        if let Some(t) = self.since {
            add("u.created_at >=", V::Integer(t));
        }
        if let Some(t) = self.until {
            add("u.created_at <", V::Integer(t));
        }
        if let Some(m) = &self.model {
            add("u.model =", V::Text(m.clone()));
        }
        if let Some(p) = &self.provider {
            add("u.provider =", V::Text(p.clone()));
        }
        (clauses.join(" AND "), params)
    }
}

impl Unitemized {
    pub(crate) fn add(&mut self, o: &Unitemized) {
        self.sessions += o.sessions;
        self.cost += o.cost;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
    }
}

/// Adds `from` into `into` model by model, then orders `into` most calls first.
fn merge_models(into: &mut Vec<ModelStats>, from: &[ModelStats]) {
    for m in from {
        match into
            .iter_mut()
            .find(|x| x.provider == m.provider && x.model == m.model)
        {
            Some(x) => x.totals.add(&m.totals),
            None => into.push(m.clone()),
        }
    }
    into.sort_by(|a, b| {
        b.totals
            .calls
            .cmp(&a.totals.calls)
            .then_with(|| a.provider.cmp(&b.provider))
            .then_with(|| a.model.cmp(&b.model))
    });
}

impl Stats {
    /// Adds another ledger's figures (another project's, for `crush stats --all`): totals,
    /// models and days are summed; sessions stay with their own project and are not taken.
    pub(crate) fn merge(&mut self, o: &Stats) {
        self.total.add(&o.total);
        self.unitemized.add(&o.unitemized);
        merge_models(&mut self.models, &o.models);
        for d in &o.days {
            match self.days.binary_search_by_key(&d.day, |x| x.day) {
                Ok(i) => {
                    let mine = &mut self.days[i];
                    mine.totals.add(&d.totals);
                    merge_models(&mut mine.models, &d.models);
                }
                Err(i) => self.days.insert(i, d.clone()),
            }
        }
    }
}

impl Totals {
    /// Adds another set of rows' sums.
    pub(crate) fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read_tokens += o.cache_read_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
        self.unknown_usage_calls += o.unknown_usage_calls;
        self.estimated_calls += o.estimated_calls;
        self.priced_calls += o.priced_calls;
        self.unpriced_calls += o.unpriced_calls;
        self.cost += o.cost;
    }

    /// A token sum, or None when no call of these reported its usage: unknown, never 0.
    pub(crate) fn known(&self, sum: i64) -> Option<i64> {
        (self.calls == 0 || self.unknown_usage_calls < self.calls).then_some(sum)
    }

    /// The cost, or None when no call was priced (never a $0 for unpriced usage).
    pub(crate) fn cost_usd(&self) -> Option<f64> {
        (self.priced_calls > 0).then_some(self.cost)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelStats {
    pub provider: String,
    pub model: String,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SessionStats {
    /// A top-level session.
    pub id: String,
    pub title: String,
    pub updated_at: i64,
    /// How many sub-agent sessions (at any depth) contributed calls.
    pub sub_agent_sessions: i64,
    /// The session's own calls and those of its sub-agents.
    pub totals: Totals,
}

/// Spend recorded in `sessions` but not in the ledger: what Go Crush (which keeps no ledger)
/// spent in this project.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Unitemized {
    /// Top-level sessions with such spend.
    pub sessions: i64,
    /// USD: a session's recorded cost beyond what its ledger rows add up to.
    pub cost: f64,
    /// Go Crush's token figures (its last call's) of the sessions with no ledger row at all.
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// The calls of one UTC day.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DayStats {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    pub totals: Totals,
    /// That day's calls per model, most calls first.
    pub models: Vec<ModelStats>,
}

impl DayStats {
    /// `2026-11-30`.
    pub(crate) fn date(&self) -> String {
        let (y, m, d) = crate::time::civil_from_days(self.day);
        format!("{y:04}-{m:02}-{d:02}")
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Stats {
    pub total: Totals,
    /// Spend recorded by another client, not itemized in the ledger.
    pub unitemized: Unitemized,
    /// Most calls first.
    pub models: Vec<ModelStats>,
    /// Oldest first; days without a call are left out.
    pub days: Vec<DayStats>,
    /// Most recently updated first; sessions without any call are left out.
    pub sessions: Vec<SessionStats>,
}

/// The aggregate columns, in the order `totals_from` reads them from `offset`.
const AGGREGATES: &str = "COUNT(*),
    COALESCE(SUM(u.input_tokens), 0),
    COALESCE(SUM(u.output_tokens), 0),
    COALESCE(SUM(u.cache_read_tokens), 0),
    COALESCE(SUM(u.cache_write_tokens), 0),
    COALESCE(SUM(u.input_tokens IS NULL AND u.output_tokens IS NULL
        AND u.cache_read_tokens IS NULL AND u.cache_write_tokens IS NULL), 0),
    COALESCE(SUM(u.cost IS NOT NULL), 0),
    COALESCE(SUM(u.cost IS NULL), 0),
    COALESCE(SUM(u.cost), 0.0),
    COALESCE(SUM(u.price_source = 'estimated'), 0)";

fn totals_from(r: &Row<'_>, offset: usize) -> rusqlite::Result<Totals> {
    Ok(Totals {
        calls: r.get(offset)?,
        input_tokens: r.get(offset + 1)?,
        output_tokens: r.get(offset + 2)?,
        cache_read_tokens: r.get(offset + 3)?,
        cache_write_tokens: r.get(offset + 4)?,
        unknown_usage_calls: r.get(offset + 5)?,
        priced_calls: r.get(offset + 6)?,
        unpriced_calls: r.get(offset + 7)?,
        cost: r.get(offset + 8)?,
        estimated_calls: r.get(offset + 9)?,
    })
}

/// Every session mapped to its top-level ancestor. A session whose parent is gone (Go Crush does
/// not delete children with their parent) counts as top-level.
const ROOTS: &str = "root(id, root_id) AS (
        SELECT id, id FROM sessions
        WHERE parent_session_id IS NULL
           OR parent_session_id NOT IN (SELECT id FROM sessions)
        UNION
        SELECT s.id, r.root_id FROM sessions s JOIN root r ON s.parent_session_id = r.id
    )";

impl Store {
    /// Spend recorded in top-level sessions beyond their ledger rows (all of it without a
    /// ledger). A session's cost includes its sub-agents' in both programs. Such spend has no
    /// model, so a model or provider filter leaves it out; dates filter on the session's last
    /// update.
    fn unitemized(&self, filter: &Filter) -> Result<Unitemized> {
        if filter.model.is_some() || filter.provider.is_some() {
            return Ok(Unitemized::default());
        }
        let ledger = if self.layout.usage {
            // Summed per session first (a pass in the session index's order), then per root.
            "SELECT r.root_id AS id, SUM(p.calls) AS calls, COALESCE(SUM(p.cost), 0.0) AS cost
             FROM (SELECT session_id, COUNT(*) AS calls, SUM(cost) AS cost
                   FROM usage GROUP BY session_id) p
             JOIN root r ON p.session_id = r.id GROUP BY r.root_id"
        } else {
            "SELECT NULL AS id, 0 AS calls, 0.0 AS cost WHERE 0"
        };
        Ok(self.conn.query_row(
            &format!(
                "WITH RECURSIVE {ROOTS}, ledger AS ({ledger}),
                 gap AS (
                     SELECT s.cost - COALESCE(l.cost, 0.0) AS cost, l.calls AS calls,
                            s.prompt_tokens AS pt, s.completion_tokens AS ct
                     FROM sessions s LEFT JOIN ledger l ON l.id = s.id
                     WHERE s.id IN (SELECT id FROM root WHERE id = root_id)
                       AND s.updated_at >= ?1 AND s.updated_at < ?2
                 )
                 SELECT COUNT(*),
                        COALESCE(SUM(CASE WHEN cost > 1e-9 THEN cost ELSE 0.0 END), 0.0),
                        COALESCE(SUM(CASE WHEN calls IS NULL THEN pt ELSE 0 END), 0),
                        COALESCE(SUM(CASE WHEN calls IS NULL THEN ct ELSE 0 END), 0)
                 FROM gap
                 WHERE cost > 1e-9 OR (calls IS NULL AND (pt > 0 OR ct > 0))"
            ),
            [
                filter.since.unwrap_or(i64::MIN),
                filter.until.unwrap_or(i64::MAX),
            ],
            |r| {
                Ok(Unitemized {
                    sessions: r.get(0)?,
                    cost: r.get(1)?,
                    prompt_tokens: r.get(2)?,
                    completion_tokens: r.get(3)?,
                })
            },
        )?)
    }

    /// Sums of the whole ledger, per model and per top-level session, and the spend recorded
    /// without it.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> Result<Stats> {
        self.stats_where(&Filter::default())
    }

    /// The total, the unitemized spend, and the sums per model and per day of the usage rows
    /// `filter` keeps: what `crush stats --all` needs of each project, in two passes over the
    /// ledger (the total is summed by SQLite, so it is exactly the ledger's sum).
    pub(crate) fn summary_where(&self, filter: &Filter) -> Result<Stats> {
        let unitemized = self.unitemized(filter)?;
        if !self.layout.usage {
            return Ok(Stats {
                unitemized,
                ..Stats::default()
            });
        }
        let (cond, params) = filter.usage_where();
        let total = self.conn.query_row(
            &format!("SELECT {AGGREGATES} FROM usage u WHERE {cond}"),
            rusqlite::params_from_iter(params.iter()),
            |r| totals_from(r, 0),
        )?;
        // One row per UTC day and model; the models' and the days' sums are added up from them.
        let mut stmt = self.conn.prepare(&format!(
            "SELECT u.created_at / 86400 AS day, u.provider, u.model, {AGGREGATES}
             FROM usage u WHERE {cond}
             GROUP BY day, u.provider, u.model ORDER BY day"
        ))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    ModelStats {
                        provider: r.get(1)?,
                        model: r.get(2)?,
                        totals: totals_from(r, 3)?,
                    },
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut models = Vec::new();
        let mut days: Vec<DayStats> = Vec::new();
        for (day, m) in rows {
            match days.last_mut() {
                Some(d) if d.day == day => {
                    d.totals.add(&m.totals);
                    d.models.push(m.clone());
                }
                _ => days.push(DayStats {
                    day,
                    totals: m.totals.clone(),
                    models: vec![m.clone()],
                }),
            }
            merge_models(&mut models, std::slice::from_ref(&m));
        }
        for d in &mut days {
            merge_models(&mut d.models, &[]);
        }
        Ok(Stats {
            total,
            unitemized,
            models,
            days,
            ..Stats::default()
        })
    }

    /// [`stats`](Self::stats) of the usage rows `filter` keeps.
    pub(crate) fn stats_where(&self, filter: &Filter) -> Result<Stats> {
        let summary = self.summary_where(filter)?;
        if !self.layout.usage {
            return Ok(summary);
        }
        let (cond, params) = filter.usage_where();
        let params = rusqlite::params_from_iter(params.iter());

        let mut stmt = self.conn.prepare(&format!(
            "WITH RECURSIVE {ROOTS}
             SELECT top.id, top.title, top.updated_at,
                    COUNT(DISTINCT CASE WHEN u.session_id != top.id THEN u.session_id END),
                    {AGGREGATES}
             FROM usage u
             JOIN root r ON u.session_id = r.id
             JOIN sessions top ON top.id = r.root_id
             WHERE {cond}
             GROUP BY top.id
             ORDER BY top.updated_at DESC, top.created_at DESC, top.rowid DESC"
        ))?;
        let sessions = stmt
            .query_map(params, |r| {
                Ok(SessionStats {
                    id: r.get(0)?,
                    title: r.get(1)?,
                    updated_at: r.get(2)?,
                    sub_agent_sessions: r.get(3)?,
                    totals: totals_from(r, 4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;

        Ok(Stats {
            sessions,
            ..summary
        })
    }
}

impl Store {
    /// What the top-level session of `session_id` has spent, sub-agents included, in USD: its
    /// recorded cost, which every priced call adds to in the transaction of its ledger row
    /// (and which Go Crush kept too). 0 for an unknown session.
    pub(crate) fn session_spend(&self, session_id: &str) -> Result<f64> {
        Ok(self.conn.query_row(
            "WITH RECURSIVE up(id, parent, cost) AS (
                 SELECT id, parent_session_id, cost FROM sessions WHERE id = ?1
                 UNION
                 SELECT s.id, s.parent_session_id, s.cost FROM sessions s JOIN up ON s.id = up.parent
             )
             SELECT COALESCE((SELECT cost FROM up
                 WHERE parent IS NULL OR parent NOT IN (SELECT id FROM sessions)), 0.0)",
            [session_id],
            |r| r.get(0),
        )?)
    }
}
