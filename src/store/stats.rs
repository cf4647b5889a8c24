//! Read-only sums over the `usage` ledger for `crush stats`: in total, per model and per
//! top-level session (a sub-agent's calls count under the session that started it, once).
//!
//! Everything is summed from `usage` rows, never from `sessions` columns, so the figures are
//! what a third-party ledger reading the same table would get.

use super::{Result, Store};
use rusqlite::Row;

/// Sums over a set of usage rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Model calls (usage rows).
    pub calls: i64,
    /// Token sums over the calls whose usage is known.
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    /// Calls for which the provider reported no usage (NULL token columns).
    pub unknown_usage_calls: i64,
    /// Calls with a cost.
    pub priced_calls: i64,
    /// Calls without a cost (NULL): unpriced model, flat-rate provider, or unknown usage.
    pub unpriced_calls: i64,
    /// USD over the priced calls only; meaningless when `priced_calls` is 0.
    pub cost: f64,
}

impl Totals {
    /// The cost, or None when no call was priced (never a $0 for unpriced usage).
    pub fn cost_usd(&self) -> Option<f64> {
        (self.priced_calls > 0).then_some(self.cost)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelStats {
    pub provider: String,
    pub model: String,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SessionStats {
    /// A top-level session.
    pub id: String,
    pub title: String,
    pub updated_at: i64,
    /// How many sub-agent sessions (at any depth) contributed calls.
    pub sub_agent_sessions: i64,
    /// The session's own calls and those of its sub-agents.
    pub totals: Totals,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub total: Totals,
    /// Most calls first.
    pub models: Vec<ModelStats>,
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
    COALESCE(SUM(u.cost), 0.0)";

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
    })
}

impl Store {
    /// Sums of the whole ledger, per model and per top-level session.
    pub fn stats(&self) -> Result<Stats> {
        if !self.layout.usage {
            return Ok(Stats::default());
        }
        let total = self
            .conn
            .query_row(&format!("SELECT {AGGREGATES} FROM usage u"), [], |r| {
                totals_from(r, 0)
            })?;

        let mut stmt = self.conn.prepare(&format!(
            "SELECT u.provider, u.model, {AGGREGATES} FROM usage u
             GROUP BY u.provider, u.model
             ORDER BY COUNT(*) DESC, u.provider, u.model"
        ))?;
        let models = stmt
            .query_map([], |r| {
                Ok(ModelStats {
                    provider: r.get(0)?,
                    model: r.get(1)?,
                    totals: totals_from(r, 2)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;

        // Each session mapped to its top-level ancestor. A session whose parent is gone (Go
        // Crush does not delete children with their parent) counts as top-level.
        let mut stmt = self.conn.prepare(&format!(
            "WITH RECURSIVE root(id, root_id) AS (
                 SELECT id, id FROM sessions
                 WHERE parent_session_id IS NULL
                    OR parent_session_id NOT IN (SELECT id FROM sessions)
                 UNION
                 SELECT s.id, r.root_id FROM sessions s JOIN root r ON s.parent_session_id = r.id
             )
             SELECT top.id, top.title, top.updated_at,
                    COUNT(DISTINCT CASE WHEN u.session_id != top.id THEN u.session_id END),
                    {AGGREGATES}
             FROM usage u
             JOIN root r ON u.session_id = r.id
             JOIN sessions top ON top.id = r.root_id
             GROUP BY top.id
             ORDER BY top.updated_at DESC, top.created_at DESC, top.rowid DESC"
        ))?;
        let sessions = stmt
            .query_map([], |r| {
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
            total,
            models,
            sessions,
        })
    }
}
