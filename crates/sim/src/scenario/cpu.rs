//! The `cpu` of a host (a [`CpuProfile`] by name, with its toggles), the `[[cpu]]`
//! profiles a file defines, and the `[[ladder]]` of rungs a file compares with a
//! historical figure.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use super::{Cost, Ctx, FlowSpec, ScenarioError};
use crate::cpu::CpuProfile;

/// A `[[cpu]]` table: a profile, from a shipped one (`base`) or from nothing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCpuProfile {
    name: Spanned<String>,
    base: Option<Spanned<String>>,
    frame: Option<Cost>,
    frame_byte: Option<Cost>,
    loopback: Option<Cost>,
    packet: Option<Cost>,
    segment: Option<Cost>,
    checksum_byte: Option<Cost>,
    copy_byte: Option<Cost>,
    call: Option<Cost>,
    handoff: Option<Cost>,
    file_byte: Option<Cost>,
    rx_buffers: Option<Spanned<u32>>,
}

/// A host's `cpu`: a profile name, or a table naming one with toggles.
#[derive(Debug)]
pub(super) struct RawHostCpu(HostCpuTable);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostCpuTable {
    profile: String,
    checksum_offload: Option<bool>,
    copy_on_send: Option<bool>,
    copy_on_receive: Option<bool>,
    rx_buffers: Option<u32>,
}

impl<'de> Deserialize<'de> for RawHostCpu {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawHostCpu;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a profile name such as \"vax-11/750\", or a table such as \
                     { profile = \"vax-11/750\", checksum_offload = true }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawHostCpu, E> {
                Ok(RawHostCpu(HostCpuTable {
                    profile: v.to_string(),
                    checksum_offload: None,
                    copy_on_send: None,
                    copy_on_receive: None,
                    rx_buffers: None,
                }))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<RawHostCpu, M::Error> {
                HostCpuTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawHostCpu)
            }
        }
        d.deserialize_any(V)
    }
}

/// A `[[ladder]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRung {
    step: String,
    flow: Spanned<String>,
    seed_mbit: Option<f64>,
}

/// One rung of a ladder: a flow whose goodput is set beside a historical figure.
#[derive(Debug, Clone, PartialEq)]
pub struct RungSpec {
    /// What the rung changes.
    pub step: String,
    /// The flow that runs it.
    pub flow: usize,
    /// The historical figure, Mbit/s (None: no figure to compare with).
    pub seed_mbit: Option<f64>,
}

/// The `[[cpu]]` profiles of a file, checked.
pub(super) fn profiles(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawCpuProfile>],
) -> Result<Vec<CpuProfile>, ScenarioError> {
    let mut out: Vec<CpuProfile> = Vec::new();
    for spanned in raw {
        let r = spanned.get_ref();
        let name = r.name.get_ref();
        if name.is_empty() || out.iter().any(|p| &p.name == name) {
            return Err(ctx.error(
                r.name.span(),
                "name",
                "a [[cpu]] needs a name, unique in the file",
            ));
        }
        let mut p = match &r.base {
            Some(base) => CpuProfile::builtin(base.get_ref()).ok_or_else(|| {
                ctx.error(
                    base.span(),
                    "base",
                    format!(
                        "unknown profile `{}`; the shipped ones are \"vax-11/750\" and \
                         \"vax-11/780\"",
                        base.get_ref()
                    ),
                )
            })?,
            None => CpuProfile {
                name: String::new(),
                frame: 0,
                frame_byte: 0,
                loopback: None,
                packet: 0,
                segment: 0,
                checksum_byte: 0,
                copy_byte: 0,
                call: 0,
                handoff: 0,
                file_byte: 0,
                rx_buffers: 32,
                checksum_offload: false,
                copy_on_send: true,
                copy_on_receive: true,
            },
        };
        p.name.clone_from(name);
        let costs = [
            (&mut p.frame, r.frame),
            (&mut p.frame_byte, r.frame_byte),
            (&mut p.packet, r.packet),
            (&mut p.segment, r.segment),
            (&mut p.checksum_byte, r.checksum_byte),
            (&mut p.copy_byte, r.copy_byte),
            (&mut p.call, r.call),
            (&mut p.handoff, r.handoff),
            (&mut p.file_byte, r.file_byte),
        ];
        for (field, value) in costs {
            if let Some(Cost(v)) = value {
                *field = v;
            }
        }
        if let Some(Cost(v)) = r.loopback {
            p.loopback = Some(v);
        }
        if let Some(n) = &r.rx_buffers {
            if *n.get_ref() == 0 {
                return Err(ctx.error(n.span(), "rx_buffers", "must be at least 1"));
            }
            p.rx_buffers = *n.get_ref() as usize;
        }
        out.push(p);
    }
    Ok(out)
}

/// A host's `cpu`, resolved against the file's profiles and the shipped ones.
pub(super) fn host_cpu(
    ctx: &Ctx<'_>,
    raw: &Spanned<RawHostCpu>,
    defined: &[CpuProfile],
) -> Result<CpuProfile, ScenarioError> {
    let table = &raw.get_ref().0;
    let mut p = defined
        .iter()
        .find(|p| p.name == table.profile)
        .cloned()
        .or_else(|| CpuProfile::builtin(&table.profile))
        .ok_or_else(|| {
            ctx.error(
                raw.span(),
                "cpu",
                format!(
                    "unknown cpu profile `{}`; define it in a [[cpu]] table or use \
                     \"vax-11/750\" or \"vax-11/780\"",
                    table.profile
                ),
            )
        })?;
    if let Some(on) = table.checksum_offload {
        p.checksum_offload = on;
    }
    if let Some(on) = table.copy_on_send {
        p.copy_on_send = on;
    }
    if let Some(on) = table.copy_on_receive {
        p.copy_on_receive = on;
    }
    if let Some(n) = table.rx_buffers {
        if n == 0 {
            return Err(ctx.error(raw.span(), "cpu", "rx_buffers must be at least 1"));
        }
        p.rx_buffers = n as usize;
    }
    Ok(p)
}

/// The `[[ladder]]` entries, each naming a flow of the file.
pub(super) fn ladder(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawRung>],
    flows: &[FlowSpec],
) -> Result<Vec<RungSpec>, ScenarioError> {
    raw.iter()
        .map(|spanned| {
            let r = spanned.get_ref();
            let flow = flows
                .iter()
                .position(|f| &f.name == r.flow.get_ref())
                .ok_or_else(|| {
                    ctx.error(
                        r.flow.span(),
                        "flow",
                        format!("no flow called `{}`", r.flow.get_ref()),
                    )
                })?;
            if r.seed_mbit.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(ctx.error(
                    spanned.span(),
                    "seed_mbit",
                    "must be a positive number of Mbit/s",
                ));
            }
            Ok(RungSpec {
                step: r.step.clone(),
                flow,
                seed_mbit: r.seed_mbit,
            })
        })
        .collect()
}
