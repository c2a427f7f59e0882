//! The fusions `rewrite` makes with `fuse` that ONNX Runtime's own do not: each
//! attention block as one `MultiHeadAttention`, and the export's GELU as one `Gelu`.
//! Each pattern matches in full, constants included, or not at all.

use std::collections::HashSet;

use super::{Graph, Init, MS, Node, int_attribute};

/// The permutation between `[batch, seq, heads, head_size]` and `[batch, heads, seq,
/// head_size]`.
pub(super) const HEADS: [i64; 4] = [0, 2, 1, 3];

/// The attention mask as int32, the form `MultiHeadAttention` reads.
pub(super) const MASK: &str = "attention_mask__i32";

/// The attention block around the `Softmax` at `i`, as the model's export writes it:
///
/// ```text
/// q' = Transpose₀₂₁₃(Reshape(q)) * c      k' = Reshape(Transpose(Reshape(Transpose₀₂₁₃(Reshape(k))))) * c
/// p  = Softmax(q' k' + Where(mask, 0, -big)),  with NaN set to 0
/// out = Reshape(Transpose₀₂₁₃(p · Transpose₀₂₁₃(Reshape(v))))
/// ```
///
/// with `c² = 1/√head_size` and the mask made from the `attention_mask` input: one
/// `MultiHeadAttention(q, k, v, key_padding_mask)`, placed where the last `Reshape`
/// was. The index of that `Reshape` and the node; `None` unless all of it matches.
pub(super) fn attention(g: &Graph<'_>, i: usize) -> Option<(usize, Node)> {
    let sm = g.node(i)?;
    if !sm.domain.is_empty() || sm.inputs.len() != 1 || sm.outputs.len() != 1 || Graph::ints(sm, "axis")? != [-1] {
        return None;
    }
    let (_, add) = g.made_by(&sm.inputs[0], "Add", 2)?;
    let (_, scores) = g.made_by(&add.inputs[0], "MatMul", 2)?;
    let (_, where_mask) = g.made_by(&add.inputs[1], "Where", 3)?;
    if g.init(&where_mask.inputs[1])?.scalar_f32()? != 0.0 || g.init(&where_mask.inputs[2])?.scalar_f32()? > -1e4 {
        return None;
    }
    if !g.inputs.contains("attention_mask") || !reaches(g, &where_mask.inputs[0], "attention_mask") {
        return None;
    }
    let (_, qc) = g.made_by(&scores.inputs[0], "Mul", 2)?;
    let (_, kc) = g.made_by(&scores.inputs[1], "Mul", 2)?;
    let c = g.init(&qc.inputs[1])?.scalar_f32()?;
    if kc.inputs[1] != qc.inputs[1] {
        return None;
    }
    let qr = g.heads_of(&qc.inputs[0])?;
    let q = &qr.inputs[0];
    let (_, k1) = g.made_by(&kc.inputs[0], "Reshape", 2)?;
    let (_, k2) = g.made_by(&k1.inputs[0], "Transpose", 1)?;
    let (_, k3) = g.made_by(&k2.inputs[0], "Reshape", 2)?;
    let k = &g.heads_of(&k3.inputs[0])?.inputs[0];
    // Softmax → IsNaN → Where(nan, 0, p) → MatMul(p, v').
    let users = g.users.get(&sm.outputs[0])?;
    let isnan = users.iter().filter_map(|&u| g.node(u)).find(|n| n.op == "IsNaN")?;
    let (_, zeroed) = g.only_user(&isnan.outputs[0])?;
    if zeroed.op != "Where" || zeroed.inputs[2] != sm.outputs[0] || g.init(&zeroed.inputs[1])?.scalar_f32()? != 0.0 {
        return None;
    }
    let (_, pv) = g.only_user(&zeroed.outputs[0])?;
    if pv.op != "MatMul" || pv.inputs[0] != zeroed.outputs[0] {
        return None;
    }
    let v = &g.heads_of(&pv.inputs[1])?.inputs[0];
    let (_, back) = g.only_user(&pv.outputs[0])?;
    if back.op != "Transpose" || Graph::ints(back, "perm")? != HEADS {
        return None;
    }
    let (end, merged) = g.only_user(&back.outputs[0])?;
    if merged.op != "Reshape" {
        return None;
    }
    // The head size: the last entry of q's `Reshape` shape, a `Concat` of scalars.
    let shape = g.producer.get(&qr.inputs[1]).and_then(|&p| g.node(p))?;
    let head = g.init(shape.inputs.last()?)?.scalar_i64().filter(|h| (1..=4096).contains(h))?;
    let hidden = g.init(&width_of(g, q)?)?.dims[1];
    if shape.op != "Concat" || hidden % head != 0 || ((c * c) as f64 * (head as f64).sqrt() - 1.0).abs() > 1e-4 {
        return None;
    }
    let mut mha = Node::new(
        "MultiHeadAttention",
        MS,
        &[q.as_str(), k.as_str(), v.as_str(), "", MASK],
        &[&merged.outputs[0]],
        format!("{}__attention", merged.name),
    );
    mha.rest = int_attribute("num_heads", hidden / head);
    Some((end, mha))
}

/// The int8 weight behind a projection `value = MatMul(x, W) [+ b]`.
fn width_of(g: &Graph<'_>, value: &str) -> Option<String> {
    let mm = match g.made_by(value, "Add", 2) {
        Some((_, add)) => g.made_by(&add.inputs[0], "MatMul", 2)?.1,
        None => g.made_by(value, "MatMul", 2)?.1,
    };
    Some(g.widened(&mm.inputs[1])?.2)
}

/// Whether `value` is computed from `input` (a bounded walk up its producers).
fn reaches(g: &Graph<'_>, value: &str, input: &str) -> bool {
    let mut todo = vec![value.to_owned()];
    let mut seen = HashSet::new();
    while let Some(v) = todo.pop() {
        if v == input {
            return true;
        }
        if seen.len() > 256 || !seen.insert(v.clone()) {
            continue;
        }
        if let Some(n) = g.producer.get(&v).and_then(|&p| g.node(p)) {
            todo.extend(n.inputs.iter().cloned());
        }
    }
    false
}

/// `x * (0.5 * (1 + erf(x / √2)))` ending at the `Mul` at `i`: one `Gelu(x)`.
pub(super) fn gelu(g: &Graph<'_>, i: usize) -> Option<Node> {
    let n = g.node(i)?;
    if !n.domain.is_empty() || n.inputs.len() != 2 || n.outputs.len() != 1 {
        return None;
    }
    let x = &n.inputs[0];
    let near = |name: &str, want: f32| g.init(name).and_then(Init::scalar_f32).is_some_and(|v| (v - want).abs() < 1e-6);
    let (_, half) = g.made_by(&n.inputs[1], "Mul", 2)?;
    let (_, one) = g.made_by(&half.inputs[1], "Add", 2)?;
    let (_, erf) = g.made_by(&one.inputs[0], "Erf", 1)?;
    let (_, div) = g.made_by(&erf.inputs[0], "Div", 2)?;
    let ok = near(&half.inputs[0], 0.5) && near(&one.inputs[1], 1.0) && near(&div.inputs[1], std::f32::consts::SQRT_2);
    (ok && div.inputs[0] == *x).then(|| Node::new("Gelu", MS, &[x], &[&n.outputs[0]], format!("{}__gelu", n.name)))
}
