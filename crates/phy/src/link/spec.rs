//! A [`LinkConfig`] written on one line, `delay=20ms,loss=1%,rate=100mbit` (the
//! command line's `--impair`), parsed by [`LinkConfig`]'s [`FromStr`]; and the pieces
//! scenario files share with it: the quantities ([`crate::units`]), a policer's action
//! ([`PoliceAction`]'s [`FromStr`]) and the queue discipline built from `qdisc`,
//! `queue`, `target` and `interval` ([`QdiscKeys`]).
//!
//! Keys: `delay`, `rate`, `loss`, `queue`, `reorder`, `reorder-delay`, `duplicate`,
//! `corrupt`, `mtu`, `qdisc`, `target`, `interval`, `shape`, `police`, `arq`. `reorder` takes
//! `P` or `P/DELAY` (held-back frames wait DELAY more, default 10 ms). `qdisc` is
//! `fifo` (the default drop-tail queue), `codel` or `fq_codel`; `target` and `interval`
//! set CoDel's and need one of the last two; `queue` then limits the discipline in
//! bytes. `shape` and `police` take a GCRA traffic contract as `PEAK/SUSTAINED/BURST`
//! (rates and a size: `shape=622mbit/100mbit/64K`); `police` may end in `/drop` (the
//! default) or `/mark`. `mtu` is the largest frame (Ethernet header included). `arq`
//! turns on link-level retransmission ([`super::arq`]): `WINDOW/TIMEOUT/TRIES`
//! (`arq=7/1s/10`: 7 frames outstanding, T1 of 1 s, given up after 10 tries), `on`
//! (LAPB's 7/3s/10) or `off`. Every error names the key and value it could not use.

use std::fmt;
use std::str::FromStr;

use impnet_core::Duration;
use impnet_core::qdisc::{Limit, QdiscConfig, UnknownQdisc};

use super::{
    ArqConfig, GcraConfig, GcraConfigError, LinkConfig, LinkConfigError, PoliceAction, Policer,
};
use crate::units::{self, QuantityError};

/// The keys a specification takes, for messages.
const KEYS: &str = "delay, rate, loss, queue, reorder, reorder-delay, duplicate, corrupt, mtu, \
                    qdisc, target, interval, shape, police, arq";

/// How long a reordered frame is held back when `reorder=P` gives no delay.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(10);

/// Why a link specification was refused; each names the item, key or value at fault.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LinkSpecError {
    /// An item without `=`.
    NotKeyValue {
        /// The item.
        item: String,
    },
    /// A key the link model does not have.
    UnknownKey {
        /// The key.
        key: String,
        /// The item it is in.
        item: String,
    },
    /// A value its key cannot use.
    BadValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What is wrong with it.
        error: ValueError,
    },
    /// `target` or `interval` without a CoDel discipline to set.
    CodelWithoutQdisc {
        /// The first item that set one.
        item: String,
    },
    /// Every value parsed, but together they are not a valid link.
    Invalid {
        /// The whole specification.
        spec: String,
        /// What is wrong.
        error: LinkConfigError,
    },
}

impl fmt::Display for LinkSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkSpecError::NotKeyValue { item } => write!(
                f,
                "`{item}` is not key=value (keys: {KEYS}; e.g. delay=20ms,loss=1%)"
            ),
            LinkSpecError::UnknownKey { key, item } => {
                write!(f, "unknown impairment `{key}` in `{item}` (keys: {KEYS})")
            }
            LinkSpecError::BadValue { key, value, error } => write!(f, "{key}={value}: {error}"),
            LinkSpecError::CodelWithoutQdisc { item } => {
                write!(f, "{item}: needs qdisc=codel or qdisc=fq_codel")
            }
            LinkSpecError::Invalid { spec, error } => write!(f, "bad impairment `{spec}`: {error}"),
        }
    }
}

impl std::error::Error for LinkSpecError {}

/// What is wrong with one key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueError {
    /// Not the size, rate, duration or probability the key takes.
    Quantity(QuantityError),
    /// A size beyond what this machine can address.
    TooLarge,
    /// Zero where only more than zero works (`target`, `interval`).
    Zero,
    /// A queue discipline that does not exist.
    UnknownQdisc(UnknownQdisc),
    /// A `shape` or `police` contract that does not parse or is not valid.
    Contract(ContractError),
    /// An `arq` setting that is not `WINDOW/TIMEOUT/TRIES`, `on` or `off`, or not
    /// possible.
    Arq(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Quantity(e) => e.fmt(f),
            ValueError::TooLarge => f.write_str("too large"),
            ValueError::Zero => f.write_str("must be more than 0"),
            ValueError::UnknownQdisc(e) => e.fmt(f),
            ValueError::Contract(e) => e.fmt(f),
            ValueError::Arq(why) => {
                write!(f, "{why}; give WINDOW/TIMEOUT/TRIES (7/1s/10), on or off")
            }
        }
    }
}

impl std::error::Error for ValueError {}

impl From<QuantityError> for ValueError {
    fn from(e: QuantityError) -> ValueError {
        ValueError::Quantity(e)
    }
}

/// What is wrong with a `PEAK/SUSTAINED/BURST[/ACTION]` traffic contract.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractError {
    /// Not three parts (four with an action, where one is allowed).
    Form {
        /// Whether an action may follow (`police`).
        action_allowed: bool,
    },
    /// A fourth part other than `drop` or `mark`.
    UnknownAction {
        /// The part.
        action: String,
    },
    /// The peak rate does not parse.
    Peak(QuantityError),
    /// The sustained rate does not parse.
    Sustained(QuantityError),
    /// The burst size does not parse.
    Burst(QuantityError),
    /// The parts parse but do not make a contract.
    Invalid(GcraConfigError),
}

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContractError::Form { action_allowed } => {
                let form = if *action_allowed {
                    "PEAK/SUSTAINED/BURST[/drop|/mark]"
                } else {
                    "PEAK/SUSTAINED/BURST"
                };
                write!(f, "give {form}, e.g. 622mbit/100mbit/64K")
            }
            ContractError::UnknownAction { action } => {
                write!(f, "unknown action `{action}`; give drop or mark")
            }
            ContractError::Peak(e) => write!(f, "peak: {e}"),
            ContractError::Sustained(e) => write!(f, "sustained: {e}"),
            ContractError::Burst(e) => write!(f, "burst: {e}"),
            ContractError::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ContractError {}

/// A policer action that is neither `drop` nor `mark`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAction(pub String);

impl fmt::Display for UnknownAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown action `{}`; give drop or mark", self.0)
    }
}

impl std::error::Error for UnknownAction {}

impl FromStr for PoliceAction {
    type Err = UnknownAction;

    /// `drop` or `mark`.
    fn from_str(s: &str) -> Result<PoliceAction, UnknownAction> {
        match s {
            "drop" => Ok(PoliceAction::Drop),
            "mark" => Ok(PoliceAction::Mark),
            other => Err(UnknownAction(other.into())),
        }
    }
}

/// A traffic contract `PEAK/SUSTAINED/BURST`, with `/drop` or `/mark` after it when
/// `action_allowed`.
fn parse_contract(
    value: &str,
    action_allowed: bool,
) -> Result<(GcraConfig, PoliceAction), ContractError> {
    let parts: Vec<&str> = value.split('/').map(str::trim).collect();
    let (peak, sustained, burst, action) = match parts[..] {
        [p, s, b] => (p, s, b, PoliceAction::Drop),
        [p, s, b, action] if action_allowed => {
            let action = action
                .parse()
                .map_err(|UnknownAction(action)| ContractError::UnknownAction { action })?;
            (p, s, b, action)
        }
        _ => return Err(ContractError::Form { action_allowed }),
    };
    let config = GcraConfig {
        peak_bps: units::parse_rate(peak).map_err(ContractError::Peak)?,
        sustained_bps: units::parse_rate(sustained).map_err(ContractError::Sustained)?,
        burst_bytes: units::parse_bytes(burst).map_err(ContractError::Burst)?,
    };
    config.validate().map_err(ContractError::Invalid)?;
    Ok((config, action))
}

/// An `arq` value: `WINDOW/TIMEOUT/TRIES`, `on` (LAPB's settings) or `off`.
pub fn parse_arq(value: &str) -> Result<Option<ArqConfig>, ValueError> {
    let bad = |what: &str| ValueError::Arq(what.to_string());
    let parts: Vec<&str> = value.split('/').map(str::trim).collect();
    let config = match parts[..] {
        ["off"] => return Ok(None),
        ["on"] => ArqConfig::default(),
        [window, timeout, tries] => ArqConfig {
            window: window
                .parse()
                .map_err(|_| bad("window: not a number of frames"))?,
            timeout: units::parse_duration(timeout)?,
            tries: tries.parse().map_err(|_| bad("tries: not a number"))?,
        },
        _ => return Err(bad("not three parts")),
    };
    match config.problem() {
        Some(problem) => Err(bad(problem)),
        None => Ok(Some(config)),
    }
}

/// What a link's `queue`, `target` and `interval` add to its queue discipline, the
/// same on the command line and in scenario files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscKeys {
    /// `queue` was given: it limits the discipline, in bytes.
    pub queue_given: bool,
    /// CoDel's target, when given.
    pub target: Option<Duration>,
    /// CoDel's interval, when given.
    pub interval: Option<Duration>,
}

impl QdiscKeys {
    /// `qdisc` for the link `config`: sized to its MTU, limited to its
    /// `queue_limit_bytes` when `queue` was given, with the target and interval given.
    pub fn apply(self, qdisc: QdiscConfig, config: &LinkConfig) -> QdiscConfig {
        let QdiscKeys {
            queue_given,
            target,
            interval,
        } = self;
        let mut qdisc = qdisc.with_mtu(config.mtu);
        if queue_given {
            qdisc = qdisc.with_limit(Limit::Bytes(config.queue_limit_bytes));
        }
        if let Some(target) = target {
            qdisc = qdisc.with_target(target);
        }
        if let Some(interval) = interval {
            qdisc = qdisc.with_interval(interval);
        }
        qdisc
    }
}

/// The keys of a specification that are settled only once all are read.
#[derive(Default)]
struct Pending {
    /// `qdisc=`: `None` for none or `fifo` (the link's own drop-tail queue: the same
    /// behaviour, computed without holding frames).
    qdisc: Option<QdiscConfig>,
    keys: QdiscKeys,
    /// The item that set `target` or `interval`, for the error if no CoDel follows.
    codel_item: Option<String>,
    reorder_delay: Option<Duration>,
}

impl Pending {
    /// The discipline for `config`, or why the keys do not fit together.
    fn qdisc(&self, config: &LinkConfig) -> Result<Option<QdiscConfig>, LinkSpecError> {
        match (self.qdisc, &self.codel_item) {
            (Some(qdisc), _) => Ok(Some(self.keys.apply(qdisc, config))),
            (None, Some(item)) => Err(LinkSpecError::CodelWithoutQdisc { item: item.clone() }),
            (None, None) => Ok(None),
        }
    }
}

/// A byte count that fits this machine's `usize`.
fn parse_usize(value: &str) -> Result<usize, ValueError> {
    usize::try_from(units::parse_bytes(value)?).map_err(|_| ValueError::TooLarge)
}

/// Apply `key=value` (from `item`) to `config` and `pending`. `Ok(false)`: no such key.
fn set(
    config: &mut LinkConfig,
    pending: &mut Pending,
    (key, value, item): (&str, &str, &str),
) -> Result<bool, ValueError> {
    match key {
        "delay" => config.delay = units::parse_duration(value)?,
        "rate" => config.rate_bps = units::parse_rate(value)?,
        "loss" => config.loss = units::parse_probability(value)?,
        "duplicate" => config.duplicate = units::parse_probability(value)?,
        "corrupt" => config.corrupt = units::parse_probability(value)?,
        "queue" => {
            config.queue_limit_bytes = parse_usize(value)?;
            pending.keys.queue_given = true;
        }
        "qdisc" => {
            pending.qdisc = match value.parse().map_err(ValueError::UnknownQdisc)? {
                QdiscConfig::Fifo(_) => None,
                other => Some(other),
            };
        }
        "target" | "interval" => {
            let d = units::parse_duration(value)?;
            if d == Duration::ZERO {
                return Err(ValueError::Zero);
            }
            if key == "target" {
                pending.keys.target = Some(d);
            } else {
                pending.keys.interval = Some(d);
            }
            pending.codel_item.get_or_insert_with(|| item.to_string());
        }
        "mtu" => config.mtu = parse_usize(value)?,
        "reorder" => {
            // The delay is read first, so its error is the one reported when both are bad.
            let (p, delay) = match value.split_once('/') {
                Some((p, d)) => (p, Some(units::parse_duration(d)?)),
                None => (value, None),
            };
            config.reorder = units::parse_probability(p)?;
            if delay.is_some() {
                pending.reorder_delay = delay;
            }
        }
        "shape" => {
            config.shape = Some(
                parse_contract(value, false)
                    .map_err(ValueError::Contract)?
                    .0,
            )
        }
        "police" => {
            let (contract, action) = parse_contract(value, true).map_err(ValueError::Contract)?;
            config.police = Some(Policer { contract, action });
        }
        "arq" => config.arq = parse_arq(value)?,
        "reorder-delay" | "reorder_delay" => {
            pending.reorder_delay = Some(units::parse_duration(value)?);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

impl FromStr for LinkConfig {
    type Err = LinkSpecError;

    /// Comma-separated `key=value` items on top of [`LinkConfig::default`] (the keys in
    /// the [module documentation](self)); empty items are skipped, so `""` is the
    /// default link. The result is validated.
    fn from_str(spec: &str) -> Result<LinkConfig, LinkSpecError> {
        let mut config = LinkConfig::default();
        let mut pending = Pending::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(LinkSpecError::NotKeyValue { item: item.into() });
            };
            let (key, value) = (key.trim(), value.trim());
            let known = set(&mut config, &mut pending, (key, value, item)).map_err(|error| {
                LinkSpecError::BadValue {
                    key: key.into(),
                    value: value.into(),
                    error,
                }
            })?;
            if !known {
                return Err(LinkSpecError::UnknownKey {
                    key: key.into(),
                    item: item.into(),
                });
            }
        }
        config.qdisc = pending.qdisc(&config)?;
        if config.reorder > 0.0 {
            config.reorder_delay = pending.reorder_delay.unwrap_or(DEFAULT_REORDER_DELAY);
        }
        config.validate().map_err(|error| LinkSpecError::Invalid {
            spec: spec.into(),
            error,
        })?;
        Ok(config)
    }
}
