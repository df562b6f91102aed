//! The `[dumbbell]` table: N senders, each on its own access link to router `left`,
//! one bottleneck link from `left` to router `right`, and N receivers on access links
//! from `right`; flow *i* runs from `sender<i>` to `receiver<i>`.

use std::ops::Range;

use impnet_core::Duration;
use impnet_phy::LinkConfig;
use toml::Spanned;

use super::{
    Ctx, LinkSpec, NodeKind, NodeSpec, PendingFlow, RawDumbbell, RawLink, ScenarioError,
    default_address, flow_kind, link_config, push_flow, push_node, tcp_config,
};

/// Most sender/receiver pairs a dumbbell may have.
const MAX_PAIRS: u32 = 10_000;

/// Adds the dumbbell's nodes, links and flows after those the file lists.
pub(super) fn expand(
    ctx: &Ctx<'_>,
    spanned: &Spanned<RawDumbbell>,
    nodes: &mut Vec<NodeSpec>,
    links: &mut Vec<LinkSpec>,
    flows: &mut Vec<PendingFlow>,
) -> Result<(), ScenarioError> {
    let raw = spanned.get_ref();
    let span = spanned.span();
    let pairs = *raw.pairs.get_ref();
    if !(1..=MAX_PAIRS).contains(&pairs) {
        return Err(ctx.error(
            raw.pairs.span(),
            "pairs",
            format!("must be 1 to {MAX_PAIRS}"),
        ));
    }
    let access = match &raw.access {
        Some(access) => model_only(ctx, access)?,
        None => LinkConfig::default(),
    };
    let bottleneck = model_only(ctx, &raw.bottleneck)?;
    let tcp = tcp_config(ctx, &raw.tcp)?;
    let named = |name: String| Spanned::new(span.clone(), name);
    for name in ["left", "right"] {
        push_node(
            ctx,
            nodes,
            &named(name.into()),
            NodeKind::Router,
            tcp.clone(),
        )?;
    }
    let (left, right) = (nodes.len() - 2, nodes.len() - 1);
    let first_sender = nodes.len();
    for side in ["sender", "receiver"] {
        for i in 1..=pairs {
            push_node(
                ctx,
                nodes,
                &named(format!("{side}{i}")),
                NodeKind::Host,
                tcp.clone(),
            )?;
        }
    }
    let pairs = pairs as usize;
    let senders = first_sender..first_sender + pairs;
    let receivers = first_sender + pairs..first_sender + 2 * pairs;
    let mut add = |name: String, a: usize, b: usize, config: LinkConfig, seed| {
        add_link(ctx, &span, links, name, (a, b), config, seed)
    };
    for (i, sender) in senders.clone().enumerate() {
        add(
            format!("access-sender{}", i + 1),
            sender,
            left,
            access,
            None,
        )?;
    }
    add(
        "bottleneck".into(),
        left,
        right,
        bottleneck,
        raw.bottleneck.get_ref().seed,
    )?;
    for (i, receiver) in receivers.clone().enumerate() {
        add(
            format!("access-receiver{}", i + 1),
            right,
            receiver,
            access,
            None,
        )?;
    }
    add_flows(ctx, raw, &span, senders.zip(receivers), flows)
}

/// Flow *i* from `sender<i>` to `receiver<i>`, each as the dumbbell's `flow` says.
fn add_flows(
    ctx: &Ctx<'_>,
    raw: &RawDumbbell,
    span: &Range<usize>,
    pairs: impl Iterator<Item = (usize, usize)>,
    flows: &mut Vec<PendingFlow>,
) -> Result<(), ScenarioError> {
    let flow = raw.flow.get_ref();
    if let Some(field) = [("from", flow.from.is_some()), ("to", flow.to.is_some())]
        .into_iter()
        .chain([("name", flow.name.is_some())])
        .find_map(|(f, present)| present.then_some(f))
    {
        return Err(ctx.field_error(
            raw.flow.span(),
            field,
            "a dumbbell names its flows and their ends itself (flow<i>: sender<i> -> receiver<i>)",
        ));
    }
    let kind = flow_kind(ctx, &raw.flow)?;
    let ipv6 = super::flow_family(ctx, flow, &kind)?;
    let start = flow.start.map_or(Duration::ZERO, |d| d.0);
    let stagger = raw.stagger.map_or(Duration::ZERO, |d| d.0);
    for (i, (from, to)) in pairs.enumerate() {
        let flow = PendingFlow {
            name: format!("flow{}", i + 1),
            from,
            to,
            span: span.clone(),
            start: start.saturating_add(stagger.saturating_mul(i as u64)),
            kind: kind.clone(),
            ipv6,
        };
        push_flow(ctx, flows, flow, span.clone())?;
    }
    Ok(())
}

/// A dumbbell link table: the link-model keys only (the dumbbell says what it joins).
fn model_only(ctx: &Ctx<'_>, spanned: &Spanned<RawLink>) -> Result<LinkConfig, ScenarioError> {
    let raw = spanned.get_ref();
    let given = [
        ("name", raw.name.is_some()),
        ("a", raw.a.is_some()),
        ("b", raw.b.is_some()),
        ("a_addr", raw.a_addr.is_some()),
        ("b_addr", raw.b_addr.is_some()),
        ("block_icmp", raw.block_icmp.is_some()),
    ];
    if let Some((field, _)) = given.into_iter().find(|(_, present)| *present) {
        return Err(ctx.field_error(
            spanned.span(),
            field,
            "a dumbbell names, joins and addresses its links itself; give only the link model",
        ));
    }
    link_config(ctx, spanned)
}

/// Adds one link with the default addresses of its position.
fn add_link(
    ctx: &Ctx<'_>,
    span: &Range<usize>,
    links: &mut Vec<LinkSpec>,
    name: String,
    (a, b): (usize, usize),
    config: LinkConfig,
    seed: Option<u64>,
) -> Result<(), ScenarioError> {
    let index = links.len();
    let (Some(a_addr), Some(b_addr)) = (default_address(index, 0), default_address(index, 1))
    else {
        return Err(ctx.error(span.clone(), "pairs", "too many links to address"));
    };
    if links.iter().any(|l| l.name == name) {
        return Err(ctx.error(
            span.clone(),
            "name",
            format!("a link called `{name}` already exists (the dumbbell makes one)"),
        ));
    }
    links.push(LinkSpec {
        name,
        a,
        b,
        a_addr,
        b_addr,
        config,
        block_icmp: false,
        seed,
    });
    Ok(())
}
