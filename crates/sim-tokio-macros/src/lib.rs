//! `#[impnet_sim_tokio::test]`: a seeded simulation test (use it through
//! `impnet-sim-tokio`, which re-exports it).
//!
//! ```ignore
//! #[impnet_sim_tokio::test(seed = 7)]
//! fn survives_a_partition(sim: &mut impnet_sim_tokio::Sim) {
//!     let server = sim.host("server");
//!     // ...
//! }
//! ```
//!
//! expands to a `#[test]` that runs the body through `impnet_sim_tokio::Sim::test(7,
//! |sim| { .. })`: a new simulation of that seed, and, when the body panics, the seed
//! and the command that replays the run appended to the panic. Without `seed = N` the
//! seed is a hash of the test's name. Written on `proc_macro` alone (no syn).

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// Make `fn name(sim: &mut Sim) { .. }` a `#[test]` run by `Sim::test` (see the crate
/// docs). The argument may be left out (`fn name() { .. }`).
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args, item) {
        Ok(tokens) => tokens,
        Err((span, message)) => error(span, &message),
    }
}

type Failure = (Span, String);

fn expand(args: TokenStream, item: TokenStream) -> Result<TokenStream, Failure> {
    let explicit_seed = seed_argument(args)?;
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(TokenTree::Group(body)) = tokens.pop() else {
        return Err((Span::call_site(), "expected a function with a body".into()));
    };
    let fn_at = (tokens.iter())
        .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "fn"))
        .ok_or_else(|| (body.span(), "expected a function".to_string()))?;
    let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(params))) =
        (tokens.get(fn_at + 1), tokens.get(fn_at + 2))
    else {
        return Err((body.span(), "expected `fn name(sim: &mut Sim)`".into()));
    };
    if tokens.len() > fn_at + 3 {
        let span = tokens[fn_at + 3].span();
        return Err((
            span,
            "a simulation test returns nothing and is not generic".into(),
        ));
    }
    let name = name.clone();
    // The parameter's pattern (`sim`, `mut sim`): what stands before its `:`.
    let binding: TokenStream = (params.stream().into_iter())
        .take_while(|t| !matches!(t, TokenTree::Punct(p) if p.as_char() == ':'))
        .collect();
    let binding = if binding.is_empty() {
        "_".to_string()
    } else {
        binding.to_string()
    };
    let seed = explicit_seed.unwrap_or_else(|| fnv1a(&name.to_string()));
    // The attributes before `fn` (docs, `#[ignore]`, `#[should_panic]`) stay on the test.
    let outer: TokenStream = tokens[..fn_at].iter().cloned().collect();
    let expanded = format!(
        "#[::core::prelude::v1::test] fn {name}() {{ \
             ::impnet_sim_tokio::Sim::test({seed}u64, \
                 |{binding}: &mut ::impnet_sim_tokio::Sim| BODY) \
         }}"
    );
    let mut out = outer;
    out.extend(replace_body(
        expanded.parse().expect("valid expansion"),
        &body,
    ));
    Ok(out)
}

/// `seed = N`, or nothing.
fn seed_argument(args: TokenStream) -> Result<Option<u64>, Failure> {
    let args: Vec<TokenTree> = args.into_iter().collect();
    match args.as_slice() {
        [] => Ok(None),
        [
            TokenTree::Ident(key),
            TokenTree::Punct(eq),
            TokenTree::Literal(value),
        ] if key.to_string() == "seed" && eq.as_char() == '=' => {
            let text = value.to_string();
            let digits = text.trim_end_matches("u64").replace('_', "");
            digits
                .parse()
                .map(Some)
                .map_err(|_| (value.span(), format!("`seed` takes a u64, not {text}")))
        }
        _ => Err((Span::call_site(), "expected `seed = N` or nothing".into())),
    }
}

/// The expansion with its `BODY` placeholder replaced by the test's body.
fn replace_body(tokens: TokenStream, body: &Group) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Ident(i) if i.to_string() == "BODY" => TokenTree::Group(body.clone()),
            TokenTree::Group(g) => {
                let mut inner = Group::new(g.delimiter(), replace_body(g.stream(), body));
                inner.set_span(g.span());
                TokenTree::Group(inner)
            }
            other => other,
        })
        .collect()
}

/// A seed from the test's name (FNV-1a), so tests without one differ.
fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `compile_error!("message")` at `span`.
fn error(span: Span, message: &str) -> TokenStream {
    let mut bang = Punct::new('!', Spacing::Alone);
    bang.set_span(span);
    let mut text = Literal::string(message);
    text.set_span(span);
    let mut args = Group::new(Delimiter::Parenthesis, TokenTree::Literal(text).into());
    args.set_span(span);
    let mut semi = Punct::new(';', Spacing::Alone);
    semi.set_span(span);
    [
        TokenTree::Ident(Ident::new("compile_error", span)),
        TokenTree::Punct(bang),
        TokenTree::Group(args),
        TokenTree::Punct(semi),
    ]
    .into_iter()
    .collect()
}
