//! The int8 model run as int8, with its attention fused.
//!
//! The int8 MiniLM stores each weight as `Cast(int8) * scale`. ONNX Runtime's constant
//! folding turns every such product into a float initializer at load: fast queries,
//! but 4× the weights' bytes in memory (106 MB of the session's 192). Without folding
//! the products run at every query (65 ms). This rewrite, done in memory on the
//! model's bytes before the session is made (the file and its pinned sha256 stay
//! as they are), keeps the weights int8 and leaves nothing to fold:
//! - `MatMul(x, Cast(W) * s)` with a per-column scale becomes
//!   `com.microsoft.DynamicQuantizeMatMul(x, W, s)`: the int8 GEMM;
//! - `Gather(Cast(E) * s, ids)` with a per-row scale (the embedding tables) becomes
//!   `Cast(Gather(E, ids)) * Gather(s, ids)`: only the looked-up rows are widened.
//!
//! With `fuse` it also replaces what ONNX Runtime's own fusions do not recognise in
//! this export (about 14 % of a 254-token pass):
//! - the bias `Add` after a GEMM goes inside it (`DynamicQuantizeMatMul`'s bias);
//! - each attention block, as the export writes scaled dot-product attention (two
//!   reshapes and transposes a head, the scale split over q and k, a `Where` mask and
//!   a NaN guard), becomes one `com.microsoft.MultiHeadAttention` reading the
//!   `attention_mask` input as its key padding mask;
//! - `x * (0.5 * (1 + erf(x / √2)))` becomes `com.microsoft.Gelu`.
//!
//! Every pattern is matched in full, constants included (the scale against the head
//! size, the mask's fill), or left as it is. What no output needs any more is dropped.
//!
//! It works on the protobuf wire format: fields it does not touch are copied byte for
//! byte, so nothing it does not understand is lost. A model without int8 weights comes
//! back as `None`, and the caller loads the file as it is.

use std::collections::{HashMap, HashSet};

mod fuse;

use fuse::{HEADS, MASK, attention, gelu};

/// One field of a protobuf message: its number, wire type, the whole encoded field
/// (tag included) and, for length-delimited fields, the payload.
#[derive(Clone, Copy)]
struct Field<'a> {
    num: u64,
    raw: &'a [u8],
    payload: &'a [u8],
    /// A varint field's value.
    value: u64,
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let start = pos;
        let tag = varint(b, &mut pos)?;
        let mut value = 0;
        let payload = match tag & 7 {
            0 => {
                value = varint(b, &mut pos)?;
                &b[pos..pos]
            }
            1 => {
                pos = pos.checked_add(8).filter(|&p| p <= b.len())?;
                &b[pos..pos]
            }
            2 => {
                let len = usize::try_from(varint(b, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|&e| e <= b.len())?;
                let p = &b[pos..end];
                pos = end;
                p
            }
            5 => {
                pos = pos.checked_add(4).filter(|&p| p <= b.len())?;
                &b[pos..pos]
            }
            _ => return None,
        };
        out.push(Field { num: tag >> 3, raw: &b[start..pos], payload, value });
    }
    Some(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, num: u64, b: &[u8]) {
    put_varint(out, (num << 3) | 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A node: what the rewrite reads and changes, and its other fields (attributes,
/// doc string) as they were.
#[derive(Clone, Default)]
struct Node {
    inputs: Vec<String>,
    outputs: Vec<String>,
    name: String,
    op: String,
    domain: String,
    rest: Vec<u8>,
}

impl Node {
    fn parse(b: &[u8]) -> Option<Node> {
        let mut n = Node::default();
        for f in fields(b)? {
            match f.num {
                1 => n.inputs.push(text(f.payload)),
                2 => n.outputs.push(text(f.payload)),
                3 => n.name = text(f.payload),
                4 => n.op = text(f.payload),
                7 => n.domain = text(f.payload),
                _ => n.rest.extend_from_slice(f.raw),
            }
        }
        Some(n)
    }

    fn new(op: &str, domain: &str, inputs: &[&str], outputs: &[&str], name: String) -> Node {
        Node {
            inputs: inputs.iter().map(|s| (*s).to_owned()).collect(),
            outputs: outputs.iter().map(|s| (*s).to_owned()).collect(),
            name,
            op: op.to_owned(),
            domain: domain.to_owned(),
            rest: Vec::new(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for i in &self.inputs {
            put_bytes(&mut b, 1, i.as_bytes());
        }
        for o in &self.outputs {
            put_bytes(&mut b, 2, o.as_bytes());
        }
        put_bytes(&mut b, 3, self.name.as_bytes());
        put_bytes(&mut b, 4, self.op.as_bytes());
        b.extend_from_slice(&self.rest);
        if !self.domain.is_empty() {
            put_bytes(&mut b, 7, self.domain.as_bytes());
        }
        b
    }
}

/// An initializer's name, element type, dims and raw bytes (empty when its values
/// are stored another way).
struct Init<'a> {
    dims: Vec<i64>,
    data_type: u64,
    raw: &'a [u8],
}

impl Init<'_> {
    /// Its value, when it is one float stored raw.
    fn scalar_f32(&self) -> Option<f32> {
        let b: [u8; 4] = self.raw.try_into().ok()?;
        (self.data_type == FLOAT && self.dims.iter().all(|&d| d == 1)).then(|| f32::from_le_bytes(b))
    }

    /// Its value, when it is one int64 stored raw.
    fn scalar_i64(&self) -> Option<i64> {
        let b: [u8; 8] = self.raw.try_into().ok()?;
        (self.data_type == INT64 && self.dims.iter().all(|&d| d == 1)).then(|| i64::from_le_bytes(b))
    }
}

fn parse_init(b: &[u8]) -> Option<(String, Init<'_>)> {
    let mut name = String::new();
    let mut init = Init { dims: Vec::new(), data_type: 0, raw: &[] };
    for f in fields(b)? {
        match f.num {
            // dims: packed or one by one.
            1 if f.raw.first().is_some_and(|t| t & 7 == 2) => {
                let mut p = 0;
                while p < f.payload.len() {
                    init.dims.push(varint(f.payload, &mut p)? as i64);
                }
            }
            1 => init.dims.push(f.value as i64),
            2 => init.data_type = f.value,
            8 => name = text(f.payload),
            9 => init.raw = f.payload,
            _ => {}
        }
    }
    Some((name, init))
}

/// The initializer `src` (its whole encoded TensorProto) renamed `name` with `dims`.
fn reshaped(src: &[u8], name: &str, dims: &[i64]) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    for d in dims {
        put_varint(&mut b, 1 << 3);
        put_varint(&mut b, *d as u64);
    }
    for f in fields(src)? {
        match f.num {
            1 | 8 => {}
            _ => b.extend_from_slice(f.raw),
        }
    }
    put_bytes(&mut b, 8, name.as_bytes());
    Some(b)
}

/// An integer attribute (AttributeProto: name, i, type INT).
fn int_attribute(name: &str, v: i64) -> Vec<u8> {
    let mut a = Vec::new();
    put_bytes(&mut a, 1, name.as_bytes());
    put_varint(&mut a, 3 << 3);
    put_varint(&mut a, v as u64);
    put_varint(&mut a, 20 << 3);
    put_varint(&mut a, 2);
    let mut field = Vec::new();
    put_bytes(&mut field, 5, &a);
    field
}

const FLOAT: u64 = 1;
const INT8: u64 = 3;
const INT32: i64 = 6;
const INT64: u64 = 7;
const MS: &str = "com.microsoft";

/// Which rewrite made a model's vectors: part of the embed stage's cache key, so
/// vectors from an older rewrite are not mixed with this one's.
pub const REWRITE: u8 = 2;

/// What [`rewrite`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fused {
    /// `MatMul`s now an int8 GEMM (their bias added inside it where one followed).
    pub int8_matmuls: usize,
    /// Attention blocks now one `MultiHeadAttention`.
    pub attention: usize,
    /// `x * 0.5 * (1 + erf(x / √2))` now one `Gelu`.
    pub gelu: usize,
}

/// The graph being rewritten (as read: the rewrite collects replacements beside it),
/// its initializers, and who produces and uses each value.
struct Graph<'a> {
    nodes: Vec<Node>,
    inits: HashMap<String, (Init<'a>, &'a [u8])>,
    producer: HashMap<String, usize>,
    users: HashMap<String, Vec<usize>>,
    inputs: HashSet<String>,
}

impl<'a> Graph<'a> {
    fn node(&self, i: usize) -> Option<&Node> {
        self.nodes.get(i)
    }

    /// The node producing `value`, when it is an `op` with `n` inputs.
    fn made_by(&self, value: &str, op: &str, n: usize) -> Option<(usize, &Node)> {
        let &i = self.producer.get(value)?;
        let node = self.node(i)?;
        (node.op == op && node.domain.is_empty() && node.inputs.len() == n).then_some((i, node))
    }

    /// The one node using `value`.
    fn only_user(&self, value: &str) -> Option<(usize, &Node)> {
        match self.users.get(value).map(Vec::as_slice) {
            Some(&[i]) => Some((i, self.node(i)?)),
            _ => None,
        }
    }

    fn init(&self, name: &str) -> Option<&Init<'a>> {
        self.inits.get(name).map(|(i, _)| i)
    }

    /// A node's integer attribute `name`, one (`axis`) or a list (`perm`).
    fn ints(node: &Node, name: &str) -> Option<Vec<i64>> {
        for f in fields(&node.rest)? {
            if f.num != 5 {
                continue;
            }
            let a = fields(f.payload)?;
            if !a.iter().any(|x| x.num == 1 && x.payload == name.as_bytes()) {
                continue;
            }
            let mut out = Vec::new();
            for x in a.iter().filter(|x| x.num == 3 || x.num == 8) {
                if x.raw.first().is_some_and(|t| t & 7 == 2) {
                    let mut p = 0;
                    while p < x.payload.len() {
                        out.push(varint(x.payload, &mut p)? as i64);
                    }
                } else {
                    out.push(x.value as i64);
                }
            }
            return Some(out);
        }
        None
    }

    /// The `Reshape` that splits a projection into heads, when `value` is it through
    /// `Transpose(HEADS)`: its inputs are the projection and the shape.
    fn heads_of(&self, value: &str) -> Option<&Node> {
        let (_, t) = self.made_by(value, "Transpose", 1)?;
        if Self::ints(t, "perm")? != HEADS {
            return None;
        }
        Some(self.made_by(&t.inputs[0], "Reshape", 2)?.1)
    }

    /// `Cast(int8 init) * float init` feeding only `value`'s user: (cast, mul, weight, scale).
    fn widened(&self, value: &str) -> Option<(usize, usize, String, String)> {
        let (m, mul) = self.made_by(value, "Mul", 2)?;
        self.only_user(value)?;
        let (c, cast) = self.made_by(&mul.inputs[0], "Cast", 1)?;
        self.only_user(&mul.inputs[0])?;
        let (w, s) = (&cast.inputs[0], &mul.inputs[1]);
        let (wi, si) = (self.init(w)?, self.init(s)?);
        (wi.data_type == INT8 && si.data_type == FLOAT && wi.dims.len() == 2).then(|| (c, m, w.clone(), s.clone()))
    }
}

/// The model's bytes rewritten (module docs), and what was done; with `fuse` false,
/// only the int8 weights. `None` when it has no int8 weights to keep or the bytes do
/// not parse.
pub fn rewrite(model: &[u8], fuse: bool) -> Option<(Vec<u8>, Fused)> {
    let top = fields(model)?;
    let graph_field = top.iter().find(|f| f.num == 7)?;
    let graph = fields(graph_field.payload)?;
    let mut g = Graph {
        nodes: Vec::new(),
        inits: HashMap::new(),
        producer: HashMap::new(),
        users: HashMap::new(),
        inputs: HashSet::new(),
    };
    let mut outputs: Vec<String> = Vec::new();
    for f in &graph {
        match f.num {
            1 => g.nodes.push(Node::parse(f.payload)?),
            5 => {
                let (name, init) = parse_init(f.payload)?;
                g.inits.insert(name, (init, f.payload));
            }
            11 | 12 => {
                let name = fields(f.payload)?.iter().find(|v| v.num == 1).map(|v| text(v.payload))?;
                if f.num == 11 {
                    g.inputs.insert(name);
                } else {
                    outputs.push(name);
                }
            }
            _ => {}
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for o in &n.outputs {
            g.producer.insert(o.clone(), i);
        }
        for v in &n.inputs {
            g.users.entry(v.clone()).or_default().push(i);
        }
    }
    let mut fused = Fused::default();
    let mut new_inits: Vec<Vec<u8>> = Vec::new();
    // Replacements by node index; the nodes they make dead go in the sweep below.
    let mut replace: HashMap<usize, Vec<Node>> = HashMap::new();
    let mut first: Vec<Node> = Vec::new();
    let mut made: HashSet<String> = HashSet::new();
    for i in 0..g.nodes.len() {
        let Some(n) = g.node(i) else { continue };
        match n.op.as_str() {
            "MatMul" if n.domain.is_empty() && n.inputs.len() == 2 && n.outputs.len() == 1 => {
                let Some((_, _, w, s)) = g.widened(&n.inputs[1]) else { continue };
                let cols = g.inits[&w].0.dims[1];
                let sd = &g.inits[&s].0.dims;
                if !(sd == &[1, cols] || sd == &[cols]) {
                    continue;
                }
                let s1 = format!("{s}__1d");
                if sd.len() == 2 && made.insert(s1.clone()) {
                    new_inits.push(reshaped(g.inits[&s].1, &s1, &[cols])?);
                }
                let scale = if sd.len() == 2 { s1 } else { s };
                // `Add(y, bias)` after it goes inside the GEMM.
                let bias = g.only_user(&n.outputs[0]).filter(|(_, a)| {
                    fuse && a.op == "Add"
                        && a.domain.is_empty()
                        && a.inputs.len() == 2
                        && a.inputs[0] == n.outputs[0]
                        && g.init(&a.inputs[1]).is_some_and(|b| b.data_type == FLOAT && b.dims == [cols])
                });
                let (x, w, scale) = (n.inputs[0].as_str(), w.as_str(), scale.as_str());
                let (inputs, out) = match bias {
                    Some((a, add)) => {
                        replace.insert(a, Vec::new());
                        (vec![x, w, scale, "", add.inputs[1].as_str()], add.outputs[0].as_str())
                    }
                    None => (vec![x, w, scale], n.outputs[0].as_str()),
                };
                let name = format!("{}__int8", n.name);
                replace.insert(i, vec![Node::new("DynamicQuantizeMatMul", MS, &inputs, &[out], name)]);
                fused.int8_matmuls += 1;
            }
            "Gather" if n.domain.is_empty() && n.inputs.len() == 2 && n.outputs.len() == 1 => {
                let Some((c, m, w, s)) = g.widened(&n.inputs[0]) else { continue };
                let rows = g.inits[&w].0.dims[0];
                if g.inits[&s].0.dims != [rows, 1] {
                    continue;
                }
                let (ids, out) = (n.inputs[1].as_str(), n.outputs[0].as_str());
                let (q, f, sc) = (format!("{out}__q"), format!("{out}__f"), format!("{out}__s"));
                let mut gq = n.clone();
                gq.inputs = vec![w.clone(), ids.to_owned()];
                gq.outputs = vec![q.clone()];
                let mut gs = n.clone();
                gs.inputs = vec![s.clone(), ids.to_owned()];
                gs.outputs = vec![sc.clone()];
                gs.name = format!("{}__scale", n.name);
                let mut cast = g.node(c)?.clone();
                cast.inputs = vec![q.clone()];
                cast.outputs = vec![f.clone()];
                let mut mul = g.node(m)?.clone();
                mul.inputs = vec![f, sc];
                mul.outputs = vec![out.to_owned()];
                replace.insert(i, vec![gq, gs, cast, mul]);
            }
            "Softmax" if fuse => {
                let Some((end, mha)) = attention(&g, i) else { continue };
                if made.insert(MASK.to_owned()) {
                    let mut cast = Node::new("Cast", "", &["attention_mask"], &[MASK], MASK.to_owned());
                    cast.rest = int_attribute("to", INT32);
                    first.push(cast);
                }
                replace.insert(end, vec![mha]);
                fused.attention += 1;
            }
            "Mul" if fuse => {
                let Some(gelu) = gelu(&g, i) else { continue };
                replace.insert(i, vec![gelu]);
                fused.gelu += 1;
            }
            _ => {}
        }
    }
    if fused.int8_matmuls == 0 {
        return None;
    }
    // The nodes in order (a rewritten node where its original stood), then only what
    // the outputs still need, and the initializers something still reads.
    let mut order: Vec<Node> = first;
    for (i, n) in g.nodes.iter().enumerate() {
        match replace.remove(&i) {
            Some(list) => order.extend(list),
            None => order.push(n.clone()),
        }
    }
    let mut live: HashSet<String> = outputs.into_iter().collect();
    let mut keep = vec![false; order.len()];
    for (k, n) in order.iter().enumerate().rev() {
        if n.outputs.iter().any(|o| live.contains(o)) {
            keep[k] = true;
            live.extend(n.inputs.iter().filter(|v| !v.is_empty()).cloned());
        }
    }
    let mut out_graph = Vec::with_capacity(graph_field.payload.len() + 1024);
    for f in &graph {
        match f.num {
            1 => {}
            5 => {
                let (name, _) = parse_init(f.payload)?;
                // An initializer also listed as an input stays: dropping it would
                // make it an input to feed.
                if live.contains(&name) || g.inputs.contains(&name) {
                    out_graph.extend_from_slice(f.raw);
                }
            }
            _ => out_graph.extend_from_slice(f.raw),
        }
    }
    for (n, _) in order.iter().zip(&keep).filter(|(_, k)| **k) {
        put_bytes(&mut out_graph, 1, &n.encode());
    }
    for t in &new_inits {
        put_bytes(&mut out_graph, 5, t);
    }
    let mut out = Vec::with_capacity(model.len() + 1024);
    let mut has_ms = false;
    for f in &top {
        match f.num {
            7 => put_bytes(&mut out, 7, &out_graph),
            8 => {
                has_ms |= fields(f.payload)?.iter().any(|o| o.num == 1 && o.payload == MS.as_bytes());
                out.extend_from_slice(f.raw);
            }
            _ => out.extend_from_slice(f.raw),
        }
    }
    if !has_ms {
        let mut op = Vec::new();
        put_bytes(&mut op, 1, MS.as_bytes());
        put_varint(&mut op, 2 << 3);
        put_varint(&mut op, 1);
        put_bytes(&mut out, 8, &op);
    }
    Some((out, fused))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model: `y = x · (Cast(W) * s)`, then GELU as the export writes it with `half`
    /// for its 0.5.
    fn gelu_model(half: f32) -> Vec<u8> {
        let tensor = |name: &str, dims: &[i64], data_type: u64, raw: &[u8]| {
            let mut t = Vec::new();
            for d in dims {
                put_varint(&mut t, 1 << 3);
                put_varint(&mut t, *d as u64);
            }
            put_varint(&mut t, 2 << 3);
            put_varint(&mut t, data_type);
            put_bytes(&mut t, 8, name.as_bytes());
            put_bytes(&mut t, 9, raw);
            t
        };
        let value = |name: &str| {
            let mut v = Vec::new();
            put_bytes(&mut v, 1, name.as_bytes());
            v
        };
        let mut g = Vec::new();
        let nodes = [
            ("Cast", vec!["w"], "wf"),
            ("Mul", vec!["wf", "s"], "ww"),
            ("MatMul", vec!["x", "ww"], "y"),
            ("Div", vec!["y", "sqrt2"], "d"),
            ("Erf", vec!["d"], "e"),
            ("Add", vec!["e", "one"], "a"),
            ("Mul", vec!["half", "a"], "h"),
            ("Mul", vec!["y", "h"], "out"),
        ];
        for (k, (op, inputs, out)) in nodes.iter().enumerate() {
            put_bytes(&mut g, 1, &Node::new(op, "", inputs, &[out], format!("n{k}")).encode());
        }
        put_bytes(&mut g, 5, &tensor("w", &[2, 2], INT8, &[1, 2, 3, 4]));
        put_bytes(&mut g, 5, &tensor("s", &[2], FLOAT, &[0.5f32, 0.25].map(f32::to_le_bytes).concat()));
        for (name, v) in [("sqrt2", std::f32::consts::SQRT_2), ("one", 1.0), ("half", half)] {
            put_bytes(&mut g, 5, &tensor(name, &[], FLOAT, &v.to_le_bytes()));
        }
        put_bytes(&mut g, 11, &value("x"));
        put_bytes(&mut g, 12, &value("out"));
        let mut m = Vec::new();
        put_bytes(&mut m, 7, &g);
        m
    }

    #[test]
    fn a_pattern_is_fused_only_when_its_constants_match() {
        let all = Fused { int8_matmuls: 1, attention: 0, gelu: 1 };
        let (bytes, fused) = rewrite(&gelu_model(0.5), true).unwrap();
        assert_eq!(fused, all);
        let graph = fields(&bytes).unwrap().into_iter().find(|f| f.num == 7).unwrap();
        let ops: Vec<String> = fields(graph.payload)
            .unwrap()
            .iter()
            .filter(|f| f.num == 1)
            .map(|f| Node::parse(f.payload).unwrap().op)
            .collect();
        assert_eq!(ops, ["DynamicQuantizeMatMul", "Gelu"], "the dead nodes are gone");
        assert_eq!(rewrite(&gelu_model(0.6), true).unwrap().1, Fused { gelu: 0, ..all }, "not GELU: left alone");
        assert_eq!(rewrite(&gelu_model(0.5), false).unwrap().1, Fused { gelu: 0, ..all }, "fusions off");
    }

    #[test]
    fn wire_format_round_trips_and_bad_bytes_are_none() {
        let mut b = Vec::new();
        put_bytes(&mut b, 3, b"name");
        put_varint(&mut b, 2 << 3);
        put_varint(&mut b, 300);
        let f = fields(&b).unwrap();
        assert_eq!((f[0].num, f[0].payload), (3, &b"name"[..]));
        assert_eq!((f[1].num, f[1].value), (2, 300));
        assert!(fields(&[0x0a, 0x05, 1]).is_none(), "a length past the end");
        assert!(rewrite(b"not a model", true).is_none());
        let n = Node::new("MatMul", "", &["x", "w"], &["y"], "m".into());
        let back = Node::parse(&n.encode()).unwrap();
        assert_eq!((back.inputs, back.outputs, back.op, back.name), (n.inputs, n.outputs, n.op, n.name));
    }
}
