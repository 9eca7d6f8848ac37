//! Derivation: from one delivery to its transport identity and, through the
//! provider's hierarchy, its business identity.
//!
//! The first strategy whose required fields are all present keys the effect;
//! every strategy above it is recorded as skipped, with the reason. The
//! chosen strategy's older, non-retired versions key the delivery too, so a
//! version bump never turns a late retry into a second effect. Nothing here
//! reads the clock: horizons are returned, the caller filters by time.

use super::catalog::Catalog;
use super::field::FieldRef;
use super::jcs;
use super::key::{Binding, INEXACT_SEAL_PREFIX, KeySecret, mask, sha256_hex};
use super::normalize::{map_all, remove_all};
use super::provider::ProviderDef;
use super::strategy::StrategyDef;
use super::types::{
    BusinessIdentity, DeliveryFacts, Derivation, ItemDerivation, SkipReason, Skipped,
    TransportIdentity, Unresolved,
};
use crate::domain::confidence::{Criticality, Strength};
use serde_json::{Map, Value, json};
use std::borrow::Cow;

use super::types::RAW_BODY_SOURCE;

impl Catalog {
    /// Transport and business identities of one delivery.
    pub fn derive(&self, facts: &DeliveryFacts<'_>, secret: &KeySecret) -> Derivation {
        let provider = self.provider(facts.provider);
        let aliased = provider.and_then(|p| p.with_header_aliases(facts.headers));
        let facts = &DeliveryFacts {
            headers: aliased.as_deref().unwrap_or(facts.headers),
            ..*facts
        };
        // One canonical form serves the body fingerprint and every strategy.
        let canonical = facts.body.map(jcs::canonical_numbers);
        let transport = transport(provider, facts, canonical.as_deref());
        let mut d = Derivation::empty(facts.provider, transport);
        let Some(provider) = provider else {
            d.unresolved = Some(Unresolved::UnknownProvider {
                provider: facts.provider.to_owned(),
            });
            return d;
        };
        let Some(body) = facts.body.filter(|_| facts.parse.is_parseable()) else {
            d.unresolved = Some(Unresolved::of_unparsed(facts.parse));
            return d;
        };
        let Some(items) = provider.batch_items(body) else {
            let canonical = canonical.as_deref().unwrap_or(body);
            d.absorb(self.derive_event(provider, facts, body, canonical, secret));
            return d;
        };
        let items: Vec<ItemDerivation> = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let canonical = jcs::canonical_numbers(item);
                let mut one = self.derive_event(provider, facts, item, &canonical, secret);
                one.index = i;
                one.event = Some(item.clone());
                one
            })
            .collect();
        super::batch::combine(&mut d, items);
        d
    }

    fn derive_event(
        &self,
        provider: &ProviderDef,
        facts: &DeliveryFacts<'_>,
        body: &Value,
        canonical: &Value,
        secret: &KeySecret,
    ) -> ItemDerivation {
        let mut out = ItemDerivation::default();
        let event_type = match provider.event_type(facts.headers, body) {
            Ok(t) => t,
            Err(m) => {
                out.unresolved = Some(Unresolved::UnknownEventType {
                    event_type: None,
                    missing: m.missing,
                });
                return out;
            }
        };
        out.event_type = Some(event_type.clone());
        let Some(hierarchy) = self.hierarchy(&provider.name, &event_type) else {
            out.unresolved = Some(Unresolved::UnknownEventType {
                event_type: Some(event_type),
                missing: Vec::new(),
            });
            return out;
        };
        // Every strategy reads the same canonical form; one without
        // normalisation or sealing reads it as it is.
        let ctx = Ctx {
            facts,
            body: canonical,
            event_type: &event_type,
            secret,
            blank_is_value: false,
        };
        for (position, name) in hierarchy.strategies.iter().enumerate() {
            let Some(current) = self.current(name) else {
                continue; // checked at build time
            };
            match ctx.attempt(current) {
                Ok(identity) => {
                    out.business = Some(identity);
                    // A version skipped for a blank field keyed such
                    // deliveries before 2026-12-07 (evening), blank and all:
                    // its key still finds them, and being blank proves
                    // nothing, so a match through it is judged weak.
                    let blank = Ctx {
                        blank_is_value: true,
                        ..ctx
                    };
                    let read_blank = |s: &StrategyDef| {
                        let identity = blank.attempt(s).ok()?;
                        Some(BusinessIdentity {
                            strength: Strength::Weak,
                            ..identity
                        })
                    };
                    let in_force = |s: &StrategyDef| match ctx.attempt(s) {
                        Ok(identity) => Some(identity),
                        Err(SkipReason::BlankField { .. }) => read_blank(s),
                        Err(_) => None,
                    };
                    out.older_versions =
                        self.older(name).into_iter().filter_map(in_force).collect();
                    // Retired versions key nothing but find the effects their
                    // migration carried over (or could not: an approval, never
                    // an ignore): the chosen strategy's, and every other
                    // strategy's of the hierarchy, whose migration may have
                    // carried an effect to the key of a strategy added since.
                    let others = hierarchy
                        .strategies
                        .iter()
                        .filter(|other| *other != name)
                        .flat_map(|other| self.retired(other));
                    out.retired_versions = self
                        .retired(name)
                        .into_iter()
                        .chain(others)
                        .filter_map(in_force)
                        .collect();
                    // What keyed this delivery before the hierarchy or a
                    // version changed still finds it: the older versions of
                    // a strategy above whose newest version no longer keys
                    // it (a field added) — its newest too, when only a blank
                    // field skipped it — and a strong strategy below, each
                    // version of it (one was added above it).
                    // (The newest versions above were attempted already:
                    // their skips say which a blank field skipped.)
                    let blank_above = (out.skipped.iter())
                        .filter(|skip| matches!(skip.reason, SkipReason::BlankField { .. }))
                        .filter_map(|skip| self.current(&skip.strategy.name))
                        .filter_map(read_blank);
                    let above = hierarchy.strategies[..position]
                        .iter()
                        .flat_map(|upper| self.older(upper));
                    let below = hierarchy.strategies[position + 1..]
                        .iter()
                        .filter(|lower| {
                            self.current(lower)
                                .is_some_and(|s| s.strength == Strength::Strong)
                        })
                        .flat_map(|lower| self.current(lower).into_iter().chain(self.older(lower)))
                        .filter(|s| s.strength == Strength::Strong);
                    out.also_keyed = (above.chain(below).filter_map(in_force))
                        .chain(blank_above)
                        .collect();
                    let lower = &hierarchy.strategies[position + 1..];
                    for lacking in self.lacking_one_field(&ctx, provider, current, lower) {
                        let known = |b: &BusinessIdentity| b.key == lacking.key;
                        if !out.older_versions.iter().any(known)
                            && !out.also_keyed.iter().any(known)
                        {
                            out.also_keyed.push(lacking);
                        }
                    }
                    return out;
                }
                Err(reason) => out.skipped.push(Skipped {
                    strategy: current.strategy_ref(),
                    reason,
                }),
            }
        }
        out.unresolved = Some(Unresolved::NoStrategyApplies { event_type });
        out
    }
}

impl Catalog {
    /// The keys a retry of this delivery lacking one field `chosen`
    /// requires would have taken, had it come first: the hierarchy falls
    /// past `chosen` to a strategy below (a reference dropped on a retry,
    /// a fingerprint instead). A strategy below that hashes the body keys
    /// the field absent, `null` and blank apart: each is looked for. Only
    /// for critical effects that such a retry could have applied (every
    /// discriminant read), and never for a field the event type is read
    /// from; a match under one is judged weak, since looking alike without
    /// the field proves nothing.
    fn lacking_one_field(
        &self,
        ctx: &Ctx<'_, '_>,
        provider: &ProviderDef,
        chosen: &StrategyDef,
        lower: &[String],
    ) -> Vec<BusinessIdentity> {
        let lower: Vec<&StrategyDef> = lower.iter().filter_map(|n| self.current(n)).collect();
        if !lower.iter().any(|s| s.criticality == Criticality::Critical) {
            return Vec::new();
        }
        // A field a strategy below discriminates on leaves its key with a
        // discriminant missing: such a retry is held, never applied.
        let discriminated = |path: &FieldRef| {
            lower.iter().any(|s| {
                (s.discriminants.iter()).any(|d| !d.optional && d.path.as_str() == path.as_str())
            })
        };
        let required = (chosen.fields.iter())
            .filter(|f| !f.optional)
            .map(|f| &f.path)
            .chain(
                (chosen.scope.iter())
                    .filter(|item| !item.optional)
                    .filter_map(|item| item.path.as_ref()),
            )
            .filter(|path| !path.is_header() && !discriminated(path));
        let applicable = |identity: BusinessIdentity| {
            (identity.criticality == Criticality::Critical
                && identity.missing_discriminants.is_empty())
            .then_some(BusinessIdentity {
                strength: Strength::Weak,
                ..identity
            })
        };
        let mut out = Vec::new();
        for path in required {
            let mut absent = ctx.body.clone();
            remove_all(&mut absent, path);
            if provider.event_type(ctx.facts.headers, &absent).as_deref() != Ok(ctx.event_type) {
                continue;
            }
            let without = Ctx {
                body: &absent,
                ..*ctx
            };
            let Some((below, identity)) = lower
                .iter()
                .find_map(|s| Some((*s, without.attempt(s).ok()?)))
            else {
                continue;
            };
            out.extend(applicable(identity));
            if below.kind.reads_fields() {
                continue;
            }
            for stand_in in [Value::Null, Value::String(String::new())] {
                let mut body = ctx.body.clone();
                map_all(&mut body, path, &|_| stand_in.clone());
                let with = Ctx {
                    body: &body,
                    ..*ctx
                };
                out.extend(with.attempt(below).ok().and_then(applicable));
            }
        }
        out
    }
}

struct Ctx<'c, 'a> {
    facts: &'c DeliveryFacts<'a>,
    /// The event body with its numbers in canonical form.
    body: &'c Value,
    event_type: &'c str,
    secret: &'c KeySecret,
    /// Whether a blank required field is read as a value (the keys such
    /// deliveries had before 2026-12-07, evening) instead of skipping.
    blank_is_value: bool,
}

impl<'c> Ctx<'c, '_> {
    fn attempt(&self, s: &StrategyDef) -> Result<BusinessIdentity, SkipReason> {
        if !s.applies_to(self.event_type) {
            return Err(SkipReason::NotApplicable {
                event_type: self.event_type.to_owned(),
            });
        }
        let body = self.normalised(s);
        let body = &body;
        let material = match s.kind.reads_fields() {
            true => Value::Object(self.read_all(&s.fields, body, true)?),
            false if s.kind == super::strategy::Kind::RawHash => {
                json!({ RAW_BODY_SOURCE: sha256_hex(self.facts.raw_body) })
            }
            false => Value::Object(Map::from_iter([(
                "body".to_owned(),
                body.value.as_ref().clone(),
            )])),
        };
        let mut scope = Map::new();
        for item in &s.scope {
            let value = match (&item.value, &item.path) {
                (Some(v), _) => Value::String(v.clone()),
                (None, Some(path)) => match self.read(path, body) {
                    Read::Found(v) => v,
                    Read::Blank(v) if item.optional || self.blank_is_value => v,
                    Read::Blank(_) => return Err(blank_field(&item.name, path)),
                    Read::Inexact => return Err(inexact_field(&item.name, path)),
                    Read::Absent if item.optional => Value::Null,
                    Read::Absent => return Err(missing(&item.name, path)),
                },
                (None, None) => Value::Null,
            };
            scope.insert(item.name.clone(), value);
        }
        let discriminants = self.read_all(&s.discriminants, body, false)?;
        // A discriminant read inexactly cannot agree or differ: missing,
        // optional or not (two rounded values would compare equal).
        let missing_discriminants = s
            .discriminants
            .iter()
            .filter(|f| match self.read(&f.path, body) {
                Read::Inexact => true,
                Read::Absent | Read::Blank(_) => !f.optional,
                Read::Found(_) => false,
            })
            .map(|f| f.name.clone())
            .collect();
        let strategy = s.strategy_ref();
        let scope = Value::Object(scope);
        let key = Binding {
            tenant: self.facts.tenant,
            source: self.facts.source,
            provider: self.facts.provider,
            environment: self.facts.environment,
            event_type: s.key_includes_event_type.then_some(self.event_type),
            effect_type: &s.effect_type,
            strategy: &strategy,
            kind: s.kind.as_str(),
            scope: &scope,
            material: &material,
        }
        .key();
        Ok(BusinessIdentity {
            strategy,
            kind: s.kind,
            strength: s.strength,
            key,
            effect_type: s.effect_type.clone(),
            criticality: s.criticality,
            horizon_secs: s.horizon.as_secs(),
            scope: mask(&scope),
            discriminants: discriminants.into_iter().collect(),
            missing_discriminants,
            material: mask(&material),
            definition_fingerprint: s.fingerprint(),
        })
    }

    /// The event body after the strategy's normalisation and sealing.
    fn normalised(&self, s: &StrategyDef) -> Normalised<'c> {
        if s.normalize.is_empty() && s.sensitive.is_empty() {
            return Normalised {
                value: Cow::Borrowed(self.body),
            };
        }
        let mut body = self.body.clone();
        s.normalize.apply_before_sensitive(&mut body);
        // A sealed value reads as a string: one that held a rounded whole
        // number is sealed under a prefix of its own, which `read` refuses
        // wherever normalisation then moves it.
        let seal = |v: &Value| {
            let sealed = self.secret.sealed(v);
            match jcs::holds_rounded_integer(v) {
                true => Value::String(sealed.replacen(SEAL_PREFIX, INEXACT_SEAL_PREFIX, 1)),
                false => Value::String(sealed),
            }
        };
        for path in &s.sensitive {
            map_all(&mut body, path, &seal);
        }
        s.normalize.apply_unordered(&mut body);
        Normalised {
            value: Cow::Owned(body),
        }
    }

    /// A header's text, or what `path` selects in `body`: numbers already in
    /// canonical form, since every body a strategy reads comes from it.
    fn read(&self, path: &FieldRef, body: &Normalised<'_>) -> Read {
        match path.resolve(self.facts.headers, Some(&body.value)) {
            None => Read::Absent,
            Some(v) if inexact(&v) => Read::Inexact,
            Some(v) if blank(&v) => Read::Blank(v),
            Some(v) => Read::Found(v),
        }
    }

    /// Named values; with `required`, an absent non-optional field skips.
    fn read_all(
        &self,
        fields: &[super::strategy::NamedField],
        body: &Normalised<'_>,
        required: bool,
    ) -> Result<Map<String, Value>, SkipReason> {
        let mut out = Map::new();
        for f in fields {
            match self.read(&f.path, body) {
                Read::Blank(_) if required && !f.optional && !self.blank_is_value => {
                    return Err(blank_field(&f.name, &f.path));
                }
                Read::Found(v) | Read::Blank(v) => {
                    out.insert(f.name.clone(), v);
                }
                Read::Inexact if required => return Err(inexact_field(&f.name, &f.path)),
                Read::Absent if required && !f.optional => return Err(missing(&f.name, &f.path)),
                Read::Absent | Read::Inexact => {
                    out.insert(f.name.clone(), Value::Null);
                }
            }
        }
        Ok(out)
    }
}

/// What a field reference reads in one delivery.
enum Read {
    Found(Value),
    /// Nothing selected, or only nulls.
    Absent,
    /// Blank text, or a container of nothing else (see `blank`): a value,
    /// but never enough to key by when the field is required.
    Blank(Value),
    /// A whole number whose exact digits were lost (see
    /// `jcs::holds_rounded_integer`): never key material.
    Inexact,
}

/// A body as one strategy reads it: normalised and sealed.
struct Normalised<'c> {
    value: Cow<'c, Value>,
}

/// How a seal begins (`KeySecret::sealed`); the seal of a value holding a
/// rounded whole number begins with `INEXACT_SEAL_PREFIX` instead: a
/// provider's text never takes that form by chance (a prefix, then 64
/// hexadecimal digits).
const SEAL_PREFIX: &str = "hmac:";

/// Whether `value` holds a whole number whose digits were lost, as read or
/// as sealed.
fn inexact(value: &Value) -> bool {
    match value {
        Value::String(text) => text
            .strip_prefix(INEXACT_SEAL_PREFIX)
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())),
        Value::Array(items) => items.iter().any(inexact),
        Value::Object(members) => members.values().any(inexact),
        number => jcs::holds_rounded_integer(number),
    }
}

fn inexact_field(name: &str, path: &FieldRef) -> SkipReason {
    SkipReason::InexactNumber {
        field: name.to_owned(),
        path: path.to_string(),
    }
}

fn blank_field(name: &str, path: &FieldRef) -> SkipReason {
    SkipReason::BlankField {
        field: name.to_owned(),
        path: path.to_string(),
    }
}

/// Whether `value` tells nothing apart: text of spaces only, or an array
/// or object holding nothing but such values (an empty one included).
fn blank(value: &Value) -> bool {
    match value {
        Value::String(text) => text.trim().is_empty(),
        Value::Array(items) => items.iter().all(blank),
        Value::Object(members) => members.values().all(blank),
        _ => false,
    }
}

fn missing(name: &str, path: &FieldRef) -> SkipReason {
    SkipReason::MissingField {
        field: name.to_owned(),
        path: path.to_string(),
    }
}

/// Delivery id (first declared transport reference present) or raw-body hash,
/// bound to tenant, source, provider and environment.
/// The headers the provider's event type is read from, with their values
/// (null when absent): a delivery's identity reads them, and a signature
/// over the body alone does not cover them, so a retry must repeat them —
/// the same delivery id with another event header is a collision.
fn read_headers(provider: &ProviderDef, headers: &[(String, String)]) -> Map<String, Value> {
    provider
        .event_type
        .iter()
        .flat_map(|rule| &rule.parts)
        .filter(|part| part.field.is_header())
        .map(|part| {
            let value = part.field.resolve(headers, None).unwrap_or(Value::Null);
            (part.field.to_string(), value)
        })
        .collect()
}

/// `canonical` is the body with its numbers in canonical form.
fn transport(
    provider: Option<&ProviderDef>,
    facts: &DeliveryFacts<'_>,
    canonical: Option<&Value>,
) -> TransportIdentity {
    let raw_body_sha256 = sha256_hex(facts.raw_body);
    let declared = provider.into_iter().flat_map(|p| &p.transport);
    let found = declared
        .filter_map(|r| {
            let v = r.resolve(facts.headers, facts.body)?;
            let text = v
                .as_str()
                .map_or_else(|| jcs::key_string(&v), str::to_owned);
            Some((r.to_string(), text))
        })
        .next();
    let (id_source, id) =
        found.unwrap_or_else(|| (RAW_BODY_SOURCE.to_owned(), raw_body_sha256.clone()));
    let bound = json!({
        "format": 1, "layer": "transport",
        "tenant": facts.tenant, "source": facts.source, "provider": facts.provider,
        "environment": facts.environment, "id_source": id_source, "id": id,
    });
    let body_fingerprint = canonical.map(|b| {
        let volatile = provider.map_or(&[][..], |p| &p.volatile[..]);
        let text = match volatile {
            [] => jcs::key_string(b),
            _ => {
                let mut b = b.clone();
                for v in volatile {
                    remove_all(&mut b, &v.path);
                }
                jcs::key_string(&b)
            }
        };
        match provider.map(|p| read_headers(p, facts.headers)) {
            Some(read) if !read.is_empty() => {
                sha256_hex(format!("{text}\n{}", jcs::key_string(&Value::Object(read))).as_bytes())
            }
            _ => sha256_hex(text.as_bytes()),
        }
    });
    TransportIdentity {
        key: sha256_hex(jcs::key_string(&bound).as_bytes()),
        id_source,
        id,
        raw_body_sha256,
        body_fingerprint,
    }
}
