//! The link model: one direction of a link with a rate, a propagation delay, a drop-tail
//! queue, and random loss, reordering, duplication and corruption.
//!
//! Pure code: time is a parameter and randomness comes from a seed, so the simulator
//! drives it in virtual time and [`Impair`](crate::Impair) in real time, with the same
//! results for the same seed and inputs.
//!
//! # Model
//! A submitted frame is first checked against the MTU. It then waits behind earlier
//! frames for the transmitter: it starts serialising at `max(now, busy_until)` and takes
//! exactly `len * 8 / rate` seconds (kept as an exact fraction across frames, so a long
//! run moves exactly `rate` bits per second). Frames waiting to start form the queue; a
//! frame that would have to wait when the waiting bytes plus its own exceed
//! `queue_limit_bytes` is tail-dropped. The frame being serialised is in the transmitter,
//! not the queue, as in a router's output port. After serialisation the frame may be lost
//! on the wire (it has still used the link's time), duplicated, held back by
//! `reorder_delay`, or have one bit flipped; it arrives `delay` after it finished
//! departing.
//!
//! With a queue discipline ([`LinkConfig::qdisc`]: CoDel, FQ-CoDel, or an explicit
//! FIFO) frames that must wait are held in an [`impnet_core::qdisc::Qdisc`] instead and
//! the transmitter takes the next one from it each time it becomes free, so the
//! discipline decides the order and drops (or CE-marks) at that moment. Frames are
//! Ethernet frames: an IPv4 frame is hashed by its 5-tuple (with a key drawn from the
//! seed) and may be CE-marked; any other frame is flow 0 and never marked.
//!
//! Besides independent `loss`, a link may lose frames in bursts, as noisy lines and
//! lossy ATM switches do: the Gilbert-Elliott model ([`GilbertElliott`]) is a two-state
//! Markov chain (good, bad) stepped once per frame, each state with its own loss
//! probability. A frame is lost if either model loses it.
//!
//! A link may hold frames to a traffic contract and police them against one, as ATM
//! does (the [`gcra`] module: peak rate, sustained rate, maximum burst size). The
//! *shaper* ([`LinkConfig::shape`]) sits in front of the transmitter: a frame starts no
//! earlier than the contract allows, waiting in the queue meanwhile (so a shaped link's
//! queue fills and tail-drops as any other). The *policer* ([`LinkConfig::police`]) is
//! the far end's usage parameter control: it checks each frame as it goes onto the wire
//! (after the shaper, at the instant serialisation starts) and drops a non-conforming
//! frame, which has used the link's time, or passes it marked (CE when the frame is
//! ECN-capable IPv4; the link has no cell-loss-priority bit).
//!
//! A link may be shared ([`LinkConfig::cross`], the [`CrossTraffic`] model): an
//! on/off source of other traffic, its periods exponentially distributed, takes part of
//! the rate while on, so a frame starting then is serialised at the rate left over.
//! A point-to-point line may retransmit frames itself ([`LinkConfig::arq`]): HDLC's
//! numbered frames with a window and go-back-N, the acknowledgements taking line time
//! on the reverse direction and the line's loss and corruption acting on every frame,
//! and a frame given up on after a number of tries lost. The [`arq`] module documents
//! the protocol and how the two directions exchange acknowledgements
//! ([`LinkModel::exchange_arq`]).
//!
//! # Super-segments
//! A TCP frame larger than a wire frame, with the segment size a TAP's virtio-net
//! header gave it ([`LinkModel::submit_segmented`]), crosses as the `n` wire frames it
//! stands for, but whole: the MTU is checked per frame, serialisation is charged for
//! all `n` frames' bytes (headers included), the drop-tail queue takes it only if all
//! `n` fit (else it is cut and its frames offered one by one), and the loss models draw
//! once per wire frame in the order [`submit`](LinkModel::submit) would for `n` frames,
//! so losses are frame for frame what they are without offloads. When a draw loses a
//! frame, the super-segment is cut into its frames (complete checksums) and only the
//! lost ones are dropped. It arrives `delay` after its last frame departed (its first
//! frames later than on a real wire by the time the others took to serialise).
//! Reordering, duplication, corruption, a queue discipline, a shaper, a policer or ARQ act
//! on single frames: with any of them every super-segment is cut first.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fmt;

use impnet_core::qdisc::{PacketMeta, Qdisc, QdiscConfig, mark_ce};
use impnet_core::{Duration, Instant};

use crate::rng::Rng;

pub mod arq;
mod cross;
pub mod gcra;
mod gso;
pub mod spec;
mod wire;

pub use arq::{ARQ_ACK_BYTES, ARQ_HEADER_BYTES, ArqConfig};
pub use cross::CrossTraffic;
pub use gcra::{Gcra, GcraConfig, GcraConfigError};

/// Nanoseconds per second, the factor between the model's time unit and bits per second.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Spare frame buffers kept for reuse.
const FREE_LIST_LIMIT: usize = 256;

/// How one direction of a link behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Bits per second the link serialises; 0 means infinitely fast.
    pub rate_bps: u64,
    /// Propagation delay, added after a frame has finished departing.
    pub delay: Duration,
    /// Bytes that may wait for the transmitter before frames are tail-dropped (when
    /// `qdisc` is `None`).
    pub queue_limit_bytes: usize,
    /// The queue discipline holding waiting frames, with its own limit; `None` (the
    /// default) for the drop-tail queue of `queue_limit_bytes`, computed without holding
    /// frames.
    pub qdisc: Option<QdiscConfig>,
    /// Probability (0..=1) that a frame is lost on the wire, independently per frame.
    pub loss: f64,
    /// Probability (0..=1) that a frame is held back by `reorder_delay`, letting later
    /// frames overtake it.
    pub reorder: f64,
    /// How long a held-back frame is delayed beyond `delay`.
    pub reorder_delay: Duration,
    /// Probability (0..=1) that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability (0..=1) that one uniformly chosen bit of a frame is flipped.
    pub corrupt: f64,
    /// Largest frame the link carries; larger frames are dropped and counted.
    pub mtu: usize,
    /// Bursty loss (Gilbert-Elliott), on top of `loss`; `None` for none.
    pub burst_loss: Option<GilbertElliott>,
    /// The contract a shaper holds frames to before they start (`None`: no shaper).
    pub shape: Option<GcraConfig>,
    /// The contract a policer checks frames against as they go onto the wire, and what
    /// it does with those that break it (`None`: no policer).
    pub police: Option<Policer>,
    /// Other traffic sharing the transmitter, on and off ([`CrossTraffic`]; `None`:
    /// the link is the frames' own).
    pub cross: Option<CrossTraffic>,
    /// Link-level retransmission of numbered frames, go-back-N (the [`arq`] module's
    /// protocol; `None`: frames cross once, as without).
    pub arq: Option<ArqConfig>,
}

/// A policer: a traffic contract and what happens to frames that do not conform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policer {
    /// The contract.
    pub contract: GcraConfig,
    /// What a non-conforming frame gets.
    pub action: PoliceAction,
}

/// What a policer does with a frame that does not conform to its contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoliceAction {
    /// Drop it (counted in [`LinkStats::dropped_police`]).
    Drop,
    /// Pass it, marked: counted in [`LinkStats::police_marked`], and CE-marked if it is
    /// ECN-capable IPv4 (ATM tags such cells CLP=1 instead).
    Mark,
}

/// The Gilbert-Elliott bursty loss model: a two-state Markov chain stepped once per
/// frame (before deciding the frame's fate), losing frames with `loss_good` in the good
/// state and `loss_bad` in the bad state. The chain starts good. Mean burst (bad period)
/// length is `1 / bad_to_good` frames; the long-run share of frames in the bad state is
/// `good_to_bad / (good_to_bad + bad_to_good)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Probability (0..=1) of moving from the good to the bad state at a frame.
    pub good_to_bad: f64,
    /// Probability (0..=1) of moving from the bad to the good state at a frame.
    pub bad_to_good: f64,
    /// Loss probability (0..=1) in the good state.
    pub loss_good: f64,
    /// Loss probability (0..=1) in the bad state.
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The long-run fraction of frames this model loses.
    pub fn mean_loss(&self) -> f64 {
        let total = self.good_to_bad + self.bad_to_good;
        if total == 0.0 {
            return self.loss_good;
        }
        let bad = self.good_to_bad / total;
        bad * self.loss_bad + (1.0 - bad) * self.loss_good
    }
}

impl Default for LinkConfig {
    /// An ideal link: infinite rate, no delay, no impairment, a 1 MiB queue, MTU 1514.
    fn default() -> LinkConfig {
        LinkConfig {
            rate_bps: 0,
            delay: Duration::ZERO,
            queue_limit_bytes: 1 << 20,
            qdisc: None,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            corrupt: 0.0,
            mtu: 1514,
            burst_loss: None,
            shape: None,
            police: None,
            cross: None,
            arq: None,
        }
    }
}

impl LinkConfig {
    /// This configuration with `rate_bps` bits per second (0 = infinite).
    pub fn with_rate_bps(self, rate_bps: u64) -> LinkConfig {
        LinkConfig { rate_bps, ..self }
    }
    /// This configuration with a propagation delay.
    pub fn with_delay(self, delay: Duration) -> LinkConfig {
        LinkConfig { delay, ..self }
    }
    /// This configuration with a queue of `queue_limit_bytes`.
    pub fn with_queue_limit_bytes(self, queue_limit_bytes: usize) -> LinkConfig {
        LinkConfig {
            queue_limit_bytes,
            ..self
        }
    }
    /// This configuration with frames waiting in the queue discipline `qdisc` (`None`
    /// for the drop-tail queue of `queue_limit_bytes`).
    pub fn with_qdisc(self, qdisc: Option<QdiscConfig>) -> LinkConfig {
        LinkConfig { qdisc, ..self }
    }
    /// This configuration with loss probability `loss`.
    pub fn with_loss(self, loss: f64) -> LinkConfig {
        LinkConfig { loss, ..self }
    }
    /// This configuration holding back a frame with probability `reorder` for `delay`.
    pub fn with_reorder(self, reorder: f64, delay: Duration) -> LinkConfig {
        LinkConfig {
            reorder,
            reorder_delay: delay,
            ..self
        }
    }
    /// This configuration with duplication probability `duplicate`.
    pub fn with_duplicate(self, duplicate: f64) -> LinkConfig {
        LinkConfig { duplicate, ..self }
    }
    /// This configuration with bit-corruption probability `corrupt`.
    pub fn with_corrupt(self, corrupt: f64) -> LinkConfig {
        LinkConfig { corrupt, ..self }
    }
    /// This configuration with Gilbert-Elliott bursty loss.
    pub fn with_burst_loss(self, model: GilbertElliott) -> LinkConfig {
        LinkConfig {
            burst_loss: Some(model),
            ..self
        }
    }
    /// This configuration with an MTU of `mtu` bytes.
    pub fn with_mtu(self, mtu: usize) -> LinkConfig {
        LinkConfig { mtu, ..self }
    }
    /// This configuration with frames shaped to `contract` (`None`: not shaped).
    pub fn with_shape(self, contract: Option<GcraConfig>) -> LinkConfig {
        LinkConfig {
            shape: contract,
            ..self
        }
    }
    /// This configuration with frames policed (`None`: not policed).
    pub fn with_police(self, police: Option<Policer>) -> LinkConfig {
        LinkConfig { police, ..self }
    }
    /// This configuration with link-level retransmission (`None`: none).
    pub fn with_arq(self, arq: Option<ArqConfig>) -> LinkConfig {
        LinkConfig { arq, ..self }
    }

    /// Checks that every probability is a number in `0..=1`, the MTU is not zero, a
    /// reorder probability comes with a reorder delay, and the shaper's and policer's
    /// contracts are valid.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        let probabilities = [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ];
        let burst = self.burst_loss.map(|ge| {
            [
                ("burst_loss.good_to_bad", ge.good_to_bad),
                ("burst_loss.bad_to_good", ge.bad_to_good),
                ("burst_loss.loss_good", ge.loss_good),
                ("burst_loss.loss_bad", ge.loss_bad),
            ]
        });
        for (name, value) in probabilities.into_iter().chain(burst.into_iter().flatten()) {
            if !(0.0..=1.0).contains(&value) {
                return Err(LinkConfigError::ProbabilityOutOfRange { name, value });
            }
        }
        if self.mtu == 0 {
            return Err(LinkConfigError::ZeroMtu);
        }
        if self.reorder > 0.0 && self.reorder_delay == Duration::ZERO {
            return Err(LinkConfigError::ReorderWithoutDelay {
                reorder: self.reorder,
            });
        }
        if let Some(cross) = self.cross {
            cross_valid(&cross, self.rate_bps)?;
        }
        let contracts = [
            ("shape", self.shape),
            ("police", self.police.map(|p| p.contract)),
        ];
        for (name, contract) in contracts {
            if let Some(Err(error)) = contract.map(|c| c.validate()) {
                return Err(LinkConfigError::Contract { name, error });
            }
        }
        if let Some(problem) = self.arq.and_then(|arq| arq.problem_on(self)) {
            return Err(LinkConfigError::Arq { problem });
        }
        Ok(())
    }

    /// Time to serialise `len` bytes at this rate, rounded up to the nanosecond (zero at
    /// infinite rate).
    pub fn transmission_time(&self, len: usize) -> Duration {
        if self.rate_bps == 0 {
            return Duration::ZERO;
        }
        let scaled = bits_scaled(len);
        Duration::from_nanos(saturate_u64(scaled.div_ceil(u128::from(self.rate_bps))))
    }
}

/// Cross traffic needs a finite link rate above its own and periods of some length.
fn cross_valid(cross: &CrossTraffic, link_bps: u64) -> Result<(), LinkConfigError> {
    let reason = if link_bps == 0 {
        "needs a link `rate`"
    } else if cross.rate_bps == 0 || cross.rate_bps >= link_bps {
        "its rate must be above 0 and below the link's"
    } else if cross.mean_on == Duration::ZERO || cross.mean_off == Duration::ZERO {
        "its mean on and off periods must be longer than 0"
    } else {
        return Ok(());
    };
    Err(LinkConfigError::Cross { reason })
}

/// What is wrong with a [`LinkConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LinkConfigError {
    /// A probability is outside `0..=1` (or is NaN).
    ProbabilityOutOfRange {
        /// The field: `loss`, `reorder`, `duplicate`, `corrupt` or a `burst_loss.` field.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// The MTU is zero, so no frame could cross.
    ZeroMtu,
    /// Frames would be held back, but by no time at all.
    ReorderWithoutDelay {
        /// The reorder probability given.
        reorder: f64,
    },
    /// The link-level retransmission's settings are impossible.
    Arq {
        /// What is wrong.
        problem: &'static str,
    },
    /// A shaper's or policer's traffic contract is invalid.
    Contract {
        /// `shape` or `police`.
        name: &'static str,
        /// What is wrong with it.
        error: GcraConfigError,
    },
    /// The cross traffic would take the whole link (or more), or has a period of no
    /// length.
    Cross {
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for LinkConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkConfigError::ProbabilityOutOfRange { name, value } => write!(
                f,
                "link `{name}` probability is {value}; give a number from 0 to 1 \
                 (0.01 means 1%)"
            ),
            LinkConfigError::ZeroMtu => write!(f, "link MTU is 0; give at least 64 bytes"),
            LinkConfigError::ReorderWithoutDelay { reorder } => write!(
                f,
                "link reorder probability is {reorder} but reorder_delay is 0, so no frame \
                 would be overtaken; set a reorder delay"
            ),
            LinkConfigError::Contract { name, error } => write!(f, "link `{name}`: {error}"),
            LinkConfigError::Cross { reason } => write!(f, "link `cross`: {reason}"),
            LinkConfigError::Arq { problem } => write!(f, "link `arq`: {problem}"),
        }
    }
}

impl std::error::Error for LinkConfigError {}

/// Counters of what a link did with the frames submitted to it.
///
/// Once every frame has been delivered: `submitted + duplicated == delivered +
/// dropped_loss + dropped_queue + dropped_aqm + dropped_oversize + dropped_police`.
/// With ARQ the wire counters (`dropped_loss`, `duplicated`, `corrupted`) count
/// transmissions, retransmissions and supervisory frames included, and once the sender
/// is idle: `submitted == delivered + dropped_queue + dropped_oversize + arq_abandoned`
/// (less one for each frame given up on that had in fact arrived, its acknowledgements
/// lost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames offered to [`LinkModel::submit`].
    pub submitted: u64,
    /// Frames (duplicates included) handed out by [`LinkModel::poll_deliver`].
    pub delivered: u64,
    /// Frames lost on the wire.
    pub dropped_loss: u64,
    /// Frames dropped because the queue was full (tail drops; FQ-CoDel drops from the
    /// fattest flow; frames held when the queue discipline was changed).
    pub dropped_queue: u64,
    /// Frames dropped by the queue discipline's CoDel.
    pub dropped_aqm: u64,
    /// Frames the queue discipline's CoDel marked Congestion Experienced.
    pub ce_marked: u64,
    /// Frames dropped because they exceeded the link MTU.
    pub dropped_oversize: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Copies held back by the reorder delay.
    pub reordered: u64,
    /// Copies with a flipped bit.
    pub corrupted: u64,
    /// Bytes in the delivered frames.
    pub bytes_delivered: u64,
    /// Frames the policer dropped (after using their serialisation time).
    pub dropped_police: u64,
    /// Frames the policer passed marked.
    pub police_marked: u64,
    /// Frames the shaper made wait (they started later than the transmitter allowed).
    pub shaped: u64,
    /// TCP super-segments ([`LinkModel::submit_segmented`]) carried whole; their
    /// wire frames count in the frame counters above.
    pub super_segments: u64,
    /// Super-segments cut into their wire frames: one of them was lost, the queue
    /// could not take them all, or an impairment acts on single frames.
    pub super_segments_cut: u64,
    /// With ARQ: I-frames sent again (after a REJ or the timer T1).
    pub arq_retransmitted: u64,
    /// With ARQ: frames the link gave up on after `tries` transmissions (lost).
    pub arq_abandoned: u64,
    /// With ARQ: frames the receiving end discarded (damaged, out of sequence,
    /// duplicate).
    pub arq_discarded: u64,
    /// With ARQ: supervisory frames (RR, REJ) this direction carried for the other.
    pub arq_acks_sent: u64,
}

/// Why the link dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Longer than the link MTU.
    Oversize,
    /// The queue was full.
    QueueFull,
    /// Lost on the wire (after using its serialisation time).
    Loss,
    /// Dropped by the policer, not conforming to its contract (after using its
    /// serialisation time).
    Policed,
}

/// What [`LinkModel::submit`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// The frame is on its way.
    Queued {
        /// When its last bit leaves the sender (arrival is this plus the delay, and any
        /// reorder delay).
        departs: Instant,
    },
    /// The frame waits in the queue discipline; its departure is decided when the
    /// transmitter reaches it.
    Held,
    /// The frame was dropped.
    Dropped(DropReason),
}

/// A copy of a frame travelling on the link.
#[derive(Debug, Clone)]
struct InFlight {
    arrival: Instant,
    /// Submission order, breaking ties between equal arrival times.
    seq: u64,
    frame: Vec<u8>,
    /// A TCP super-segment carried whole ([`LinkModel::submit_segmented`]), standing
    /// for this many wire frames; `None` for one plain frame.
    whole: Option<Whole>,
    /// An ARQ frame's number or acknowledgement (`None` without ARQ).
    tag: Option<arq::Tag>,
}

/// What a super-segment carried whole stands for on the wire.
#[derive(Debug, Clone, Copy)]
struct Whole {
    gso_size: u16,
    frames: u64,
    wire_bytes: u64,
}

impl InFlight {
    fn key(&self) -> (Instant, u64) {
        (self.arrival, self.seq)
    }
}

impl PartialEq for InFlight {
    fn eq(&self, other: &InFlight) -> bool {
        self.key() == other.key()
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &InFlight) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    /// Reversed, so that `BinaryHeap` (a max-heap) yields the earliest arrival first.
    fn cmp(&self, other: &InFlight) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// One random stream per impairment: turning one impairment on or off leaves the
/// others' decisions frame for frame unchanged, so experiments compare like with like.
#[derive(Debug, Clone)]
struct Streams {
    loss: Rng,
    reorder: Rng,
    duplicate: Rng,
    corrupt: Rng,
    /// Forked after the others, so that adding it left their draws unchanged.
    burst: Rng,
}

/// The counters of a queue discipline the link copies into its [`LinkStats`].
#[derive(Debug, Clone, Copy)]
struct QdiscCounters {
    overflow: u64,
    codel: u64,
    ce: u64,
}

impl QdiscCounters {
    fn of(queue: &Qdisc) -> QdiscCounters {
        let s = queue.stats();
        QdiscCounters {
            overflow: s.dropped_overflow,
            codel: s.dropped_codel,
            ce: s.ce_marked,
        }
    }
}

/// One direction of a link. Call [`submit`](LinkModel::submit) when a frame is sent,
/// [`next_arrival`](LinkModel::next_arrival) to learn when to look again, and
/// [`poll_deliver`](LinkModel::poll_deliver) until it returns `None` to collect the
/// frames that have arrived. Calls must not go back in time.
#[derive(Debug, Clone)]
pub struct LinkModel {
    config: LinkConfig,
    streams: Streams,
    /// When the transmitter finishes the last accepted frame, in units of 1/`scale()`
    /// nanoseconds (nanoseconds times the rate), so that serialisation times add up
    /// without rounding.
    busy_until_scaled: u128,
    /// Frames accepted but not yet started serialising, as (start, length), in start
    /// order; start is in the same units as `busy_until_scaled`.
    waiting: VecDeque<(u128, usize)>,
    /// Sum of the lengths in `waiting`.
    waiting_bytes: usize,
    /// With a queue discipline, the frames waiting for the transmitter (and `waiting`
    /// stays empty). Not empty only while the transmitter is busy.
    held: Option<Qdisc>,
    /// The flow hash key of the frames given to `held`.
    flow_key: u64,
    /// The frames are bare IP packets (a TUN, an IP-level link), not Ethernet: how
    /// the queue discipline and CE marking find the IP header.
    ip_level: bool,
    /// The copies on the wire, in arrival order.
    in_flight: wire::Wire,
    next_seq: u64,
    /// The Gilbert-Elliott chain is in its bad state.
    burst_bad: bool,
    /// The shaper's state, with `config.shape`.
    shaper: Option<Gcra>,
    /// The cross traffic's state, with `config.cross`.
    cross: Option<cross::CrossState>,
    /// The stream the cross traffic's periods are drawn from.
    cross_rng: Rng,
    /// The policer's state, with `config.police`.
    policer: Option<Gcra>,
    /// The link-level retransmission's state, with `config.arq`.
    arq: Option<Box<arq::Arq>>,
    /// Buffers of delivered frames given back by [`LinkModel::recycle`].
    free: Vec<Vec<u8>>,
    stats: LinkStats,
}

/// What the queue discipline needs of `frame` (IPv4 or IPv6, bare when `ip_level`,
/// else in Ethernet), hashed with `key`.
fn classify(ip_level: bool, frame: &[u8], key: u64) -> PacketMeta {
    if ip_level {
        PacketMeta::ip(frame, key)
    } else {
        PacketMeta::ethernet(frame, key)
    }
}

impl LinkModel {
    /// A link behaving as `config` says, its random choices drawn from `seed`.
    ///
    /// # Panics
    /// If `config` fails [`LinkConfig::validate`]; use [`LinkModel::try_new`] to handle
    /// the error instead.
    pub fn new(config: LinkConfig, seed: u64) -> LinkModel {
        match LinkModel::try_new(config, seed) {
            Ok(model) => model,
            Err(e) => panic!("invalid link configuration: {e}"),
        }
    }

    /// A link behaving as `config` says, or why `config` is invalid.
    pub fn try_new(config: LinkConfig, seed: u64) -> Result<LinkModel, LinkConfigError> {
        config.validate()?;
        let mut root = Rng::new(seed);
        let streams = Streams {
            loss: root.fork(),
            reorder: root.fork(),
            duplicate: root.fork(),
            corrupt: root.fork(),
            burst: root.fork(),
        };
        let flow_key = root.fork().next_u64();
        // Forked after the others, so a link without cross traffic draws as before.
        let cross_rng = root.fork();
        Ok(LinkModel {
            config,
            streams,
            busy_until_scaled: 0,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            held: config.qdisc.map(Qdisc::new),
            flow_key,
            ip_level: false,
            in_flight: wire::Wire::default(),
            next_seq: 0,
            burst_bad: false,
            shaper: config.shape.map(Gcra::new),
            policer: config.police.map(|p| Gcra::new(p.contract)),
            cross: config
                .cross
                .map(|c| cross::CrossState::new(c, cross_rng.clone())),
            cross_rng,
            arq: config.arq.map(|c| Box::new(arq::Arq::new(c))),
            free: Vec::new(),
            stats: LinkStats::default(),
        })
    }

    /// The same link carrying bare IP packets (a TUN device, an IP-level interface)
    /// rather than Ethernet frames: its queue discipline hashes flows and CE-marks
    /// from byte 0, by the IP version there.
    #[must_use]
    pub fn ip_level(mut self) -> LinkModel {
        self.ip_level = true;
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Changes the configuration from now on (a rate change, a loss episode). Frames
    /// already accepted keep the departure times they were given. A change of queue
    /// discipline drops the frames held in the old one (counted in `dropped_queue`); a
    /// new shaping or policing contract starts with empty buckets.
    pub fn set_config(&mut self, config: LinkConfig) -> Result<(), LinkConfigError> {
        config.validate()?;
        if config.shape != self.config.shape {
            self.shaper = config.shape.map(Gcra::new);
        }
        if config.police != self.config.police {
            self.policer = config.police.map(|p| Gcra::new(p.contract));
        }
        if config.cross != self.config.cross {
            self.cross = config
                .cross
                .map(|c| cross::CrossState::new(c, self.cross_rng.clone()));
        }
        match (&mut self.arq, config.arq) {
            (Some(arq), Some(new)) => arq.set_config(new),
            (state, new) => *state = new.map(|c| Box::new(arq::Arq::new(c))),
        }
        if config.qdisc != self.config.qdisc {
            let held = self.held.as_ref().map_or(0, Qdisc::len_packets);
            self.stats.dropped_queue += held as u64;
            self.held = config.qdisc.map(Qdisc::new);
        }
        let (old, new) = (self.scale(), scale_of(&config));
        let rescale = |t: u128| t.div_ceil(old).saturating_mul(new);
        self.busy_until_scaled = rescale(self.busy_until_scaled);
        for (start, _) in &mut self.waiting {
            *start = rescale(*start);
        }
        self.config = config;
        Ok(())
    }

    /// What the link has done so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Time units per nanosecond in the scaled clock.
    fn scale(&self) -> u128 {
        scale_of(&self.config)
    }

    /// Offers one frame to the link at `now`.
    pub fn submit(&mut self, now: Instant, frame: &[u8]) -> Submit {
        self.stats.submitted += 1;
        let len = frame.len();
        if len > self.config.mtu {
            self.stats.dropped_oversize += 1;
            return Submit::Dropped(DropReason::Oversize);
        }
        if self.arq.is_some() {
            return self.submit_arq(now, frame);
        }
        let now_scaled = u128::from(now.as_nanos()).saturating_mul(self.scale());
        if self.held.is_some() {
            return self.submit_held(now, now_scaled, frame);
        }
        self.start_waiting_frames(now_scaled);

        let free = now_scaled.max(self.busy_until_scaled);
        let start = self.shaped_start(free);
        let must_wait = start > now_scaled;
        if must_wait {
            if self.waiting_bytes.saturating_add(len) > self.config.queue_limit_bytes {
                self.stats.dropped_queue += 1;
                return Submit::Dropped(DropReason::QueueFull);
            }
            self.waiting.push_back((start, len));
            self.waiting_bytes += len;
        }
        self.stats.shaped += u64::from(start > free);
        self.transmit(start, frame)
    }

    /// When a frame the transmitter could start at `free` (scaled) may start under the
    /// shaper's contract: `free`, or the first nanosecond the contract allows.
    fn shaped_start(&self, free: u128) -> u128 {
        let scale = self.scale();
        let Some(shaper) = &self.shaper else {
            return free;
        };
        let free_at = Instant::from_nanos(nanos_ceil(free, scale));
        let eligible = shaper.earliest(free_at);
        if eligible == free_at {
            return free;
        }
        u128::from(eligible.as_nanos()).saturating_mul(scale)
    }

    /// [`transmit`](LinkModel::transmit) from `free` (scaled) or, with a shaper, from
    /// when it allows, counting a frame it made wait.
    fn transmit_shaped(&mut self, free: u128, frame: &[u8]) -> Submit {
        let start = self.shaped_start(free);
        self.stats.shaped += u64::from(start > free);
        self.transmit(start, frame)
    }

    /// The time (scaled) `len` bytes starting at `start` (scaled) take on the wire: at
    /// the link's rate, or at what the cross traffic leaves of it while that is on.
    fn serialisation(&mut self, start: u128, len: usize) -> u128 {
        let rate = self.config.rate_bps;
        if rate == 0 {
            return 0;
        }
        let bits = bits_scaled(len);
        let Some(cross) = self.cross.as_mut() else {
            return bits;
        };
        let at = nanos_ceil(start, scale_of(&self.config));
        match cross.rate_at(at) {
            cross if cross > 0 && cross < rate => {
                bits * u128::from(rate) / u128::from(rate - cross)
            }
            _ => bits,
        }
    }

    /// Serialises `frame` from `start` (scaled, at or after what the shaper allows),
    /// then polices it, loses it or launches its copies.
    fn transmit(&mut self, start: u128, frame: &[u8]) -> Submit {
        self.transmit_fated(start, frame, None)
    }

    /// [`transmit`](LinkModel::transmit), with the loss models' decision already
    /// drawn (`Some(lost)`) for a frame cut from a super-segment.
    fn transmit_fated(&mut self, start: u128, frame: &[u8], fate: Option<bool>) -> Submit {
        // The start in nanoseconds, for a shaper or a policer (a division spared
        // without them).
        let start_at = || Instant::from_nanos(nanos_ceil(start, self.scale()));
        let start_at = (self.shaper.is_some() || self.policer.is_some()).then(start_at);
        let serialisation = self.serialisation(start, frame.len());
        if let (Some(shaper), Some(start_at)) = (&mut self.shaper, start_at) {
            shaper.accept(start_at, frame.len());
        }
        self.busy_until_scaled = start.saturating_add(serialisation);
        let departs = Instant::from_nanos(nanos_ceil(self.busy_until_scaled, self.scale()));

        let conforms = match (&mut self.policer, start_at) {
            (Some(policer), Some(start_at)) => policer.police(start_at, frame.len()),
            _ => true,
        };
        let action = self.config.police.map(|p| p.action);
        let mark = match action {
            Some(PoliceAction::Drop) if !conforms => {
                self.stats.dropped_police += 1;
                return Submit::Dropped(DropReason::Policed);
            }
            Some(PoliceAction::Mark) if !conforms => {
                self.stats.police_marked += 1;
                true
            }
            _ => false,
        };
        if fate.unwrap_or_else(|| self.draw_loss()) {
            self.stats.dropped_loss += 1;
            return Submit::Dropped(DropReason::Loss);
        }
        let arrives = departs + self.config.delay;
        self.launch_copy(arrives, frame, mark, None);
        if self.streams.duplicate.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            self.launch_copy(arrives, frame, mark, None);
        }
        Submit::Queued { departs }
    }

    /// [`submit`](LinkModel::submit) with a queue discipline: the frame starts at once
    /// if the transmitter is idle and nothing waits, else it is offered to the queue.
    fn submit_held(&mut self, now: Instant, now_scaled: u128, frame: &[u8]) -> Submit {
        self.start_held_frames(now_scaled);
        let Some(queue) = &mut self.held else {
            return self.transmit_shaped(now_scaled, frame);
        };
        if queue.is_empty() && self.busy_until_scaled <= now_scaled {
            return self.transmit_shaped(now_scaled, frame);
        }
        let before = QdiscCounters::of(queue);
        let meta = classify(self.ip_level, frame, self.flow_key);
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        let result = queue.enqueue(now, buf, meta);
        self.absorb_counters(before);
        match result {
            Ok(()) => Submit::Held,
            Err(dropped) => {
                self.recycle(dropped.packet);
                Submit::Dropped(DropReason::QueueFull)
            }
        }
    }

    /// Lets the transmitter take frames from the queue discipline each time it became
    /// free, up to `now_scaled`: a frame starts the instant the previous one finished.
    fn start_held_frames(&mut self, now_scaled: u128) {
        let scale = self.scale();
        while let Some(queue) = &mut self.held {
            if queue.is_empty() || self.busy_until_scaled > now_scaled {
                return;
            }
            let start = self.busy_until_scaled;
            let free_at = Instant::from_nanos(nanos_ceil(start, scale));
            let before = QdiscCounters::of(queue);
            let next = queue.dequeue(free_at);
            self.absorb_counters(before);
            let Some(frame) = next else {
                return;
            };
            self.transmit_shaped(start, &frame);
            self.recycle(frame);
        }
    }

    /// Adds what the queue discipline dropped or marked since `before` to the stats.
    fn absorb_counters(&mut self, before: QdiscCounters) {
        let Some(queue) = &self.held else {
            return;
        };
        let now = QdiscCounters::of(queue);
        self.stats.dropped_queue += now.overflow.saturating_sub(before.overflow);
        self.stats.dropped_aqm += now.codel.saturating_sub(before.codel);
        self.stats.ce_marked += now.ce.saturating_sub(before.ce);
    }

    /// Whether the wire loses the next frame: the independent draw, then a step of the
    /// Gilbert-Elliott chain (both drawn, whatever the first says).
    fn draw_loss(&mut self) -> bool {
        let independent = self.streams.loss.chance(self.config.loss);
        independent | self.burst_lost()
    }

    /// Steps the Gilbert-Elliott chain for one frame and says whether it loses the frame.
    fn burst_lost(&mut self) -> bool {
        let Some(ge) = self.config.burst_loss else {
            return false;
        };
        let flip = if self.burst_bad {
            ge.bad_to_good
        } else {
            ge.good_to_bad
        };
        if self.streams.burst.chance(flip) {
            self.burst_bad = !self.burst_bad;
        }
        let loss = if self.burst_bad {
            ge.loss_bad
        } else {
            ge.loss_good
        };
        self.streams.burst.chance(loss)
    }

    /// Removes from the queue the frames whose serialisation has begun by `now_scaled`.
    fn start_waiting_frames(&mut self, now_scaled: u128) {
        while let Some(&(start, len)) = self.waiting.front() {
            if start > now_scaled {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= len;
        }
    }

    /// Puts one copy of `frame` on the wire, due at `arrives` unless held back, maybe
    /// with one bit flipped, CE-marked if `mark` says so and it is ECN-capable IPv4.
    fn launch_copy(
        &mut self,
        arrives: Instant,
        frame: &[u8],
        mark: bool,
        mut tag: Option<arq::Tag>,
    ) {
        let mut arrival = arrives;
        if self.streams.reorder.chance(self.config.reorder) {
            arrival += self.config.reorder_delay;
            self.stats.reordered += 1;
        }
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        // Only a marked copy needs its IP header found.
        if mark && let Some(offset) = classify(self.ip_level, &buf, 0).ip_offset {
            mark_ce(&mut buf, offset);
        }
        if self.streams.corrupt.chance(self.config.corrupt) && !buf.is_empty() {
            let bit = self.streams.corrupt.below(buf.len() as u64 * 8);
            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
            self.stats.corrupted += 1;
            if let Some(tag) = &mut tag {
                tag.damaged = true;
            }
        }
        self.in_flight.push(InFlight {
            arrival,
            seq: self.next_seq,
            frame: buf,
            whole: None,
            tag,
        });
        self.next_seq += 1;
    }

    /// The next frame whose arrival time is at or before `now`, in arrival order (ties
    /// in submission order), or `None` if none has arrived yet. Give the buffer back with
    /// [`LinkModel::recycle`] when done to avoid an allocation per frame.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.poll_deliver_segmented(now).map(|(frame, _)| frame)
    }

    /// As [`poll_deliver`](LinkModel::poll_deliver), with the segment size of a TCP
    /// super-segment [`submit_segmented`](LinkModel::submit_segmented) carried whole
    /// (`None` for a plain frame): give it to the next device as such
    /// (`Device::send_segmented`).
    pub fn poll_deliver_segmented(&mut self, now: Instant) -> Option<(Vec<u8>, Option<u16>)> {
        if self.held.is_some() {
            self.start_held_frames(u128::from(now.as_nanos()).saturating_mul(self.scale()));
        }
        if self.arq.is_some() {
            self.serve_arq(now);
        }
        let (frame, whole) = loop {
            if self.in_flight.peek()?.arrival > now {
                return None;
            }
            let InFlight {
                frame, whole, tag, ..
            } = self.in_flight.pop()?;
            match tag {
                Some(tag) if !self.receive_arq(tag) => self.recycle(frame),
                _ => break (frame, whole),
            }
        };
        let (frames, bytes) = whole.map_or((1, frame.len() as u64), |w| (w.frames, w.wire_bytes));
        self.stats.delivered += frames;
        self.stats.bytes_delivered += bytes;
        Some((frame, whole.map(|w| w.gso_size)))
    }

    /// When the next frame arrives, if any is in flight, or, with a queue discipline
    /// holding frames, when the transmitter takes the next one if that is earlier: call
    /// [`poll_deliver`](LinkModel::poll_deliver) then (it may return nothing).
    pub fn next_arrival(&self) -> Option<Instant> {
        let mut arrival = self.in_flight.peek().map(|f| f.arrival);
        if let Some(t) = self.next_arq_event() {
            arrival = Some(arrival.map_or(t, |a| a.min(t)));
        }
        match &self.held {
            Some(queue) if !queue.is_empty() => {
                let free = self.busy_until();
                Some(arrival.map_or(free, |a| a.min(free)))
            }
            _ => arrival,
        }
    }

    /// Returns a delivered frame's buffer for reuse by later frames.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.free.len() < FREE_LIST_LIMIT {
            self.free.push(buf);
        }
    }

    /// Bytes held by the spare frame buffers kept for reuse (at most 256 of them, each
    /// as large as the largest frame it carried) and, with ARQ, by the frames its
    /// sender holds (its queue and window, bounded by the queue limit and the window):
    /// memory a leak check subtracts.
    pub fn cached_bytes(&self) -> usize {
        let held = self.arq.as_ref().map_or(0, |arq| arq.cached_bytes());
        self.free.iter().map(Vec::capacity).sum::<usize>() + held
    }

    /// Copies in flight (submitted, not lost, not yet delivered).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Bytes waiting for the transmitter as of the last [`submit`](LinkModel::submit)
    /// (or, with a queue discipline, the last call).
    pub fn queued_bytes(&self) -> usize {
        self.held
            .as_ref()
            .map_or(self.waiting_bytes, Qdisc::len_bytes)
    }

    /// The queue discipline holding waiting frames, if the link has one (its
    /// [`stats`](Qdisc::stats) say more than [`LinkStats`]).
    pub fn qdisc(&self) -> Option<&Qdisc> {
        self.held.as_ref()
    }

    /// When the transmitter finishes the frames accepted so far (rounded up to the
    /// nanosecond).
    pub fn busy_until(&self) -> Instant {
        Instant::from_nanos(nanos_ceil(self.busy_until_scaled, self.scale()))
    }
}

/// Units per nanosecond of a configuration's scaled clock: the rate, or 1 at infinite
/// rate (where serialisation takes no time and plain nanoseconds suffice).
fn scale_of(config: &LinkConfig) -> u128 {
    u128::from(config.rate_bps.max(1))
}

/// Serialisation time of `len` bytes in scaled units: `len * 8` bits, each taking
/// `1e9 / rate` ns, that is `1e9` units of `1 / rate` ns.
fn bits_scaled(len: usize) -> u128 {
    (len as u128) * 8 * NANOS_PER_SEC
}

/// `scaled.div_ceil(scale)` in nanoseconds, saturated: by a 64-bit division when both
/// fit in 64 bits (a run's first 2^64 scaled units, minutes to hours), the same result
/// without the 128-bit division's call.
#[inline]
fn nanos_ceil(scaled: u128, scale: u128) -> u64 {
    match (u64::try_from(scaled), u64::try_from(scale)) {
        (Ok(scaled), Ok(scale)) => scaled.div_ceil(scale),
        _ => saturate_u64(scaled.div_ceil(scale)),
    }
}

fn saturate_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_arq;
#[cfg(test)]
mod tests_gcra;
#[cfg(test)]
mod tests_gso;
#[cfg(test)]
mod tests_qdisc;
#[cfg(test)]
mod tests_spec;
