//! Webhook bodies as providers send them, derived deterministically from
//! `(seed, event index)`: a "norefid" refund provider signing with Standard
//! Webhooks (no event id in the body, only a `refund_reference`) and Stripe
//! `refund.created` events (`evt_…` id). Bodies can be re-encoded the way a
//! provider's retry sometimes is: members reordered, whitespace changed, a
//! volatile field (`sent_at`, `pending_webhooks`) changed.

use crate::prng::{SplitMix64, base36, hash3};

/// 2026-03-02T09:00:00Z: the first event's `sent_at` / `created`.
const BASE_UNIX: i64 = 1_772_442_000;
/// Seconds between two consecutive events' timestamps.
const EVENT_SPACING_SECS: i64 = 3;
/// Amounts that come back often, so that equal-amount refunds are natural.
const COMMON_AMOUNTS: [i64; 8] = [500, 1000, 1500, 2000, 2500, 4999, 9900, 15000];
const CURRENCIES: [&str; 3] = ["EUR", "USD", "GBP"];

/// Field tags for `hash3`, one per derived value.
const TAG_PROVIDER: u64 = 1;
const TAG_PAYMENT: u64 = 2;
const TAG_AMOUNT: u64 = 3;
const TAG_CURRENCY: u64 = 4;
const TAG_REFERENCE: u64 = 5;
const TAG_EVENT_ID: u64 = 6;
const TAG_REFUND_ID: u64 = 7;
const TAG_MESSAGE_ID: u64 = 8;
const TAG_REQUEST_ID: u64 = 9;
const TAG_SHUFFLE: u64 = 10;
const TAG_CHARGE: u64 = 11;
const TAG_CUSTOMER: u64 = 12;

/// Which configured source (and so which signature scheme) an event goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Standard Webhooks signatures, body without any event id.
    Norefid,
    Stripe,
}

/// How one attempt is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The provider's usual compact form (first attempts, byte-identical retries).
    Original,
    /// Same members, another order.
    Reordered,
    /// Same members and order, whitespace and newlines added.
    Whitespace,
    /// The volatile field changed (a new `sent_at`, a new `pending_webhooks`).
    Volatile,
}

/// Everything derived for one event. `root` is the event whose payment and
/// amount it shares (itself, or an earlier one for a legitimate repeat).
#[derive(Debug, Clone)]
pub struct Facts {
    pub provider: Provider,
    pub event: u64,
    pub payment_id: String,
    /// Stripe `ch_…` (the refunded charge); the customer's e-mail for norefid.
    pub payer: String,
    pub amount: i64,
    pub currency: &'static str,
    pub refund_reference: String,
    /// Stripe `evt_…`; Standard Webhooks `msg_…` (the `webhook-id` header).
    pub event_id: String,
    pub created_unix: i64,
}

/// A family of events generated from one seed.
#[derive(Debug, Clone, Copy)]
pub struct Universe {
    seed: u64,
}

impl Universe {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    fn h(&self, index: u64, tag: u64) -> u64 {
        hash3(self.seed, index, tag)
    }

    /// The facts of event `event`, sharing payment and amount with `root`.
    pub fn facts(&self, event: u64, root: u64) -> Facts {
        let provider = if self.h(root, TAG_PROVIDER) & 1 == 0 {
            Provider::Norefid
        } else {
            Provider::Stripe
        };
        let amount_word = self.h(root, TAG_AMOUNT);
        let amount = if amount_word.is_multiple_of(4) {
            100 + (amount_word >> 8) as i64 % 99_900
        } else {
            COMMON_AMOUNTS[(amount_word >> 8) as usize % COMMON_AMOUNTS.len()]
        };
        let payment_word = self.h(root, TAG_PAYMENT);
        let (payment_id, payer, event_id) = match provider {
            Provider::Norefid => (
                format!("pay_{}", base36(payment_word, 16)),
                format!("c{}@example.com", base36(self.h(root, TAG_CUSTOMER), 10)),
                format!("msg_{}", base36(self.h(event, TAG_MESSAGE_ID), 24)),
            ),
            Provider::Stripe => (
                format!("pi_{}", base36(payment_word, 24)),
                format!("ch_{}", base36(self.h(root, TAG_CHARGE), 24)),
                format!("evt_{}", base36(self.h(event, TAG_EVENT_ID), 24)),
            ),
        };
        Facts {
            provider,
            event,
            payment_id,
            payer,
            amount,
            currency: CURRENCIES[self.h(root, TAG_CURRENCY) as usize % CURRENCIES.len()],
            refund_reference: format!("rr_{}", base36(self.h(event, TAG_REFERENCE), 16)),
            event_id,
            created_unix: BASE_UNIX + event as i64 * EVENT_SPACING_SECS,
        }
    }

    /// The body of attempt `attempt` (0 = first) of an event, encoded as asked.
    pub fn body(&self, facts: &Facts, encoding: Encoding, attempt: u16) -> Vec<u8> {
        let volatile = u64::from(encoding == Encoding::Volatile) * u64::from(attempt.max(1));
        let tree = match facts.provider {
            Provider::Norefid => self.norefid(facts, volatile),
            Provider::Stripe => self.stripe(facts, volatile),
        };
        let style = match encoding {
            Encoding::Original | Encoding::Volatile => Style::Compact,
            Encoding::Reordered => Style::Shuffled,
            Encoding::Whitespace => Style::Pretty,
        };
        let mut rng = SplitMix64::new(self.h(facts.event, TAG_SHUFFLE ^ u64::from(attempt)));
        let mut out = String::with_capacity(512);
        render(&tree, style, &mut rng, 0, &mut out);
        out.into_bytes()
    }

    fn norefid(&self, f: &Facts, volatile: u64) -> Node {
        let sent_at = f.created_unix + 45 + 300 * volatile as i64;
        Node::Obj(vec![
            ("type", Node::str("refund.created")),
            ("payment_id", Node::str(&f.payment_id)),
            ("amount", Node::Int(f.amount)),
            ("currency", Node::str(f.currency)),
            ("refund_reference", Node::str(&f.refund_reference)),
            ("customer_email", Node::str(&f.payer)),
            ("sent_at", Node::Str(iso8601(sent_at))),
        ])
    }

    fn stripe(&self, f: &Facts, volatile: u64) -> Node {
        let refund_id = format!("re_{}", base36(self.h(f.event, TAG_REFUND_ID), 24));
        let request_id = format!("req_{}", base36(self.h(f.event, TAG_REQUEST_ID), 14));
        Node::Obj(vec![
            ("id", Node::str(&f.event_id)),
            ("object", Node::str("event")),
            ("api_version", Node::str("2025-03-31.basil")),
            ("created", Node::Int(f.created_unix)),
            (
                "data",
                Node::Obj(vec![(
                    "object",
                    Node::Obj(vec![
                        ("id", Node::Str(refund_id)),
                        ("object", Node::str("refund")),
                        ("amount", Node::Int(f.amount)),
                        ("charge", Node::str(&f.payer)),
                        ("currency", Node::Str(f.currency.to_ascii_lowercase())),
                        ("payment_intent", Node::str(&f.payment_id)),
                        ("reason", Node::str("requested_by_customer")),
                        ("status", Node::str("succeeded")),
                        (
                            "metadata",
                            Node::Obj(vec![("refund_reference", Node::str(&f.refund_reference))]),
                        ),
                    ]),
                )]),
            ),
            ("livemode", Node::Bool(false)),
            ("pending_webhooks", Node::Int(1 + volatile as i64)),
            (
                "request",
                Node::Obj(vec![
                    ("id", Node::Str(request_id)),
                    ("idempotency_key", Node::Null),
                ]),
            ),
            ("type", Node::str("refund.created")),
        ])
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn iso8601(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A JSON document whose member order is ours to choose.
enum Node {
    Str(String),
    Int(i64),
    Bool(bool),
    Null,
    Obj(Vec<(&'static str, Node)>),
}

impl Node {
    fn str(s: &str) -> Self {
        Self::Str(s.to_owned())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Compact,
    /// Compact, members of every object in another (seeded) order.
    Shuffled,
    /// Two-space indentation, `": "` separators.
    Pretty,
}

fn render(node: &Node, style: Style, rng: &mut SplitMix64, depth: usize, out: &mut String) {
    match node {
        Node::Str(s) => push_string(s, out),
        Node::Int(n) => out.push_str(&n.to_string()),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Null => out.push_str("null"),
        Node::Obj(members) => {
            let mut order: Vec<usize> = (0..members.len()).collect();
            if style == Style::Shuffled && members.len() > 1 {
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.range(0, i + 1));
                }
                if order.iter().enumerate().all(|(i, j)| i == *j) {
                    order.rotate_left(1);
                }
            }
            out.push('{');
            for (n, &i) in order.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                if style == Style::Pretty {
                    newline(depth + 1, out);
                }
                let (name, value) = &members[i];
                push_string(name, out);
                out.push_str(if style == Style::Pretty { ": " } else { ":" });
                render(value, style, rng, depth + 1, out);
            }
            if style == Style::Pretty && !members.is_empty() {
                newline(depth, out);
            }
            out.push('}');
        }
    }
}

fn newline(depth: usize, out: &mut String) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn push_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}
