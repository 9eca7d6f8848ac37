//! The delivery mix, planned up front from a seed: ~70% new events, ~20%
//! provider retries of an earlier event (half byte-identical, half re-encoded:
//! reordered, re-spaced, or with the volatile field changed) and ~10%
//! legitimate repeats (same payment and amount as an earlier event, another
//! reference). The plan is compact (a few bytes per step); bodies are rendered
//! when sent.

use serde::Serialize;

use crate::payloads::{Encoding, Facts, Universe};
use crate::prng::SplitMix64;

/// Percent of steps that are retries, then legitimate repeats; the rest are new.
const RETRY_PERCENT: u64 = 20;
const REPEAT_PERCENT: u64 = 10;
/// Retries and repeats pick among this many recent events.
const RECENT_WINDOW: usize = 2_000;

/// What one step sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The first attempt of a new event.
    New,
    /// A new event repeating an earlier one's payment and amount.
    Repeat,
    /// Another attempt of an earlier event.
    Retry(Encoding),
}

#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub event: u32,
    pub attempt: u16,
    pub kind: Kind,
}

/// How many steps of each kind the plan holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Mix {
    pub new: u64,
    pub repeat: u64,
    pub retry_identical: u64,
    pub retry_reordered: u64,
    pub retry_whitespace: u64,
    pub retry_volatile: u64,
}

impl Mix {
    /// Distinct business effects the plan asks for: one per event.
    pub fn planned_effects(&self) -> u64 {
        self.new + self.repeat
    }

    pub fn retries(&self) -> u64 {
        self.retry_identical + self.retry_reordered + self.retry_whitespace + self.retry_volatile
    }
}

pub struct Plan {
    pub universe: Universe,
    pub steps: Vec<Step>,
    /// For each event, the event whose payment and amount it shares.
    roots: Vec<u32>,
    pub mix: Mix,
}

impl Plan {
    /// Plans `n` steps. A retry only targets events first sent at least `lag`
    /// steps earlier, so that with `lag` ≥ clients the original is (nearly
    /// always) already answered, as with a real provider's retry delay.
    pub fn new(seed: u64, n: usize, lag: usize) -> Self {
        let mut rng = SplitMix64::new(seed);
        let mut steps = Vec::with_capacity(n);
        let mut roots: Vec<u32> = Vec::with_capacity(n);
        let mut first_step: Vec<u32> = Vec::with_capacity(n);
        let mut attempts: Vec<u16> = Vec::with_capacity(n);
        let mut mix = Mix::default();
        for i in 0..n {
            let roll = rng.below(100);
            // Events first sent at least `lag` steps ago.
            let ripe = first_step.partition_point(|&s| (s as usize) + lag <= i);
            let step = if roll < RETRY_PERCENT && ripe > 0 {
                let event = rng.range(ripe.saturating_sub(RECENT_WINDOW), ripe);
                attempts[event] = attempts[event].saturating_add(1);
                let encoding = match rng.below(8) {
                    0..=3 => Encoding::Original,
                    4 => Encoding::Reordered,
                    5 => Encoding::Whitespace,
                    _ => Encoding::Volatile,
                };
                match encoding {
                    Encoding::Original => mix.retry_identical += 1,
                    Encoding::Reordered => mix.retry_reordered += 1,
                    Encoding::Whitespace => mix.retry_whitespace += 1,
                    Encoding::Volatile => mix.retry_volatile += 1,
                }
                Step {
                    event: event as u32,
                    attempt: attempts[event],
                    kind: Kind::Retry(encoding),
                }
            } else {
                let event = roots.len();
                let repeat = roll < RETRY_PERCENT + REPEAT_PERCENT && event > 0;
                let root = if repeat {
                    mix.repeat += 1;
                    roots[rng.range(event.saturating_sub(RECENT_WINDOW), event)]
                } else {
                    mix.new += 1;
                    event as u32
                };
                roots.push(root);
                first_step.push(i as u32);
                attempts.push(0);
                Step {
                    event: event as u32,
                    attempt: 0,
                    kind: if repeat { Kind::Repeat } else { Kind::New },
                }
            };
            steps.push(step);
        }
        Self {
            universe: Universe::new(seed),
            steps,
            roots,
            mix,
        }
    }

    pub fn facts(&self, step: &Step) -> Facts {
        let root = self
            .roots
            .get(step.event as usize)
            .copied()
            .unwrap_or(step.event);
        self.universe.facts(u64::from(step.event), u64::from(root))
    }

    /// The body a step sends.
    pub fn body(&self, step: &Step, facts: &Facts) -> Vec<u8> {
        let encoding = match step.kind {
            Kind::New | Kind::Repeat => Encoding::Original,
            Kind::Retry(encoding) => encoding,
        };
        self.universe.body(facts, encoding, step.attempt)
    }

    /// Mean body size over the plan (the baseline writes rows of this size).
    pub fn mean_body_bytes(&self) -> usize {
        if self.steps.is_empty() {
            return 0;
        }
        let total: usize = self
            .steps
            .iter()
            .map(|step| self.body(step, &self.facts(step)).len())
            .sum();
        total / self.steps.len()
    }
}
