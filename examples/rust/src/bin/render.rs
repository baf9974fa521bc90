//! render (Rust): renders a ~30 KB HTML table of products per request, from data loaded
//! at start-up. Byte-for-byte the same pages as examples/c/render.c (same PRNG, same
//! CSV format, same query handling), so the two can be compared and benchmarked.
//!
//! ```sh
//! forkvm serve examples/out/render_rs
//! forkvm serve --allow-read examples/data examples/out/render_rs examples/data/products.csv
//! curl 'http://127.0.0.1:8080/shop?user=Ada&sort=price'
//! ```
//!
//! Start-up: 200 products from a fixed-seed PRNG, or the CSV file given as the first
//! argument (`sku,name,category,price_cents,stock`; blank lines and `#` lines skipped).
//! Per request: sort by `?sort=id|name|price|stock` (ties by id), echo the path and
//! `?user=` (default "guest") HTML-escaped.

use forkvm_guest::{abi, respond, serve, Request};
use std::io::Write;
use std::sync::OnceLock;

/// Longest field kept (the C version's buffers hold 63 bytes).
const FIELD_MAX: usize = 63;
const MAX_PRODUCTS: usize = 10_000;

struct Product {
    id: i64,
    sku: Vec<u8>,
    name: Vec<u8>,
    category: Vec<u8>,
    price_cents: i64,
    stock: i64,
}

static PRODUCTS: OnceLock<Vec<Product>> = OnceLock::new();

/// A 64-bit LCG (Knuth's MMIX constants); the top 31 bits are the output.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

const ADJECTIVES: [&str; 16] = [
    "Sturdy",
    "Elegant",
    "Rustic",
    "Compact",
    "Deluxe",
    "Classic",
    "Modern",
    "Vintage",
    "Portable",
    "Heavy-Duty",
    "Handmade",
    "Minimal",
    "Bright",
    "Quiet",
    "Smart",
    "Folding",
];
const MATERIALS: [&str; 12] = [
    "Oak", "Steel", "Copper", "Linen", "Ceramic", "Bamboo", "Glass", "Leather", "Wool", "Marble",
    "Walnut", "Brass",
];
const NOUNS: [&str; 16] = [
    "Lamp", "Chair", "Kettle", "Backpack", "Clock", "Desk", "Mug", "Blanket", "Shelf", "Speaker",
    "Notebook", "Planter", "Stool", "Tray", "Vase", "Bench",
];
const CATEGORIES: [&str; 8] = [
    "Home", "Kitchen", "Office", "Outdoor", "Travel", "Garden", "Lighting", "Decor",
];

fn generate() -> Vec<Product> {
    let mut rng = Rng(0x2545f4914f6cdd1d);
    fn pick(rng: &mut Rng, list: &[&str]) -> String {
        list[rng.next() as usize % list.len()].to_string()
    }
    let mut out = Vec::with_capacity(200);
    for i in 0..200 {
        let name = format!(
            "{} {} {}",
            pick(&mut rng, &ADJECTIVES),
            pick(&mut rng, &MATERIALS),
            pick(&mut rng, &NOUNS)
        );
        let category = pick(&mut rng, &CATEGORIES);
        let id = i as i64 + 1;
        let price_cents = 199 + i64::from(rng.next() % 99800);
        let stock = i64::from(rng.next() % 500);
        let sku = format!("SKU-{:05}-{:04X}", id, rng.next() & 0xffff);
        out.push(Product {
            id,
            sku: sku.into_bytes(),
            name: name.into_bytes(),
            category: category.into_bytes(),
            price_cents,
            stock,
        });
    }
    out
}

/// C's strtol(s, NULL, 10) for the values we expect: spaces, sign, digits.
fn strtol(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = i < s.len() && s[i] == b'-';
    if i < s.len() && (s[i] == b'-' || s[i] == b'+') {
        i += 1;
    }
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add(i64::from(s[i] - b'0'));
        i += 1;
    }
    if neg {
        -v
    } else {
        v
    }
}

fn load(path: &str) -> std::io::Result<Vec<Product>> {
    let data = std::fs::read(path)?;
    let mut out = Vec::new();
    for line in data.split_inclusive(|&b| b == b'\n') {
        if matches!(line.first(), None | Some(b'#' | b'\n' | b'\r')) {
            continue;
        }
        if out.len() == MAX_PRODUCTS {
            break;
        }
        // Fields end at ',', '\r' or '\n'; a field is truncated to FIELD_MAX bytes.
        let mut rest = line;
        let mut field = || {
            let n = rest
                .iter()
                .position(|&b| matches!(b, b',' | b'\r' | b'\n'))
                .unwrap_or(rest.len());
            let f = rest[..n.min(FIELD_MAX)].to_vec();
            rest = if rest.get(n) == Some(&b',') {
                &rest[n + 1..]
            } else {
                &rest[n..]
            };
            f
        };
        let (sku, name, category) = (field(), field(), field());
        let price_cents = strtol(&field());
        let stock = strtol(&field());
        out.push(Product {
            id: out.len() as i64 + 1,
            sku,
            name,
            category,
            price_cents,
            stock,
        });
    }
    Ok(out)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `%XX` and `+` decoding, at most `cap - 1` bytes, cut at a NUL (like the C strings).
fn url_decode(s: &[u8], cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() && out.len() + 1 < cap {
        let mut c = s[i];
        if c == b'+' {
            c = b' ';
        } else if c == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                c = h * 16 + l;
                i += 2;
            }
        }
        out.push(c);
        i += 1;
    }
    if let Some(nul) = out.iter().position(|&b| b == 0) {
        out.truncate(nul);
    }
    out
}

/// The decoded value of query parameter `name` (first occurrence).
fn query_get(q: &[u8], name: &[u8], cap: usize) -> Option<Vec<u8>> {
    q.split(|&b| b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        (k == name).then(|| url_decode(v, cap))
    })
}

fn html(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}

const HEAD: &str = "<!DOCTYPE html>\n\
<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<title>Product catalogue</title>\n\
<style>\n\
body { font-family: sans-serif; margin: 2em; }\n\
table { border-collapse: collapse; }\n\
td, th { border: 1px solid #ccc; padding: 2px 8px; }\n\
td.num { text-align: right; }\n\
</style>\n</head>\n<body>\n<h1>Product catalogue</h1>\n";

fn render(products: &[Product], req: &Request) -> Vec<u8> {
    let user = query_get(req.query, b"user", 256).unwrap_or_else(|| b"guest".to_vec());
    let sort = query_get(req.query, b"sort", 32).unwrap_or_default();
    let sort: &str = match sort.as_slice() {
        b"name" => "name",
        b"price" => "price",
        b"stock" => "stock",
        _ => "id",
    };
    let mut order: Vec<&Product> = products.iter().collect();
    order.sort_by(|x, y| {
        let c = match sort {
            "name" => x.name.cmp(&y.name),
            "price" => x.price_cents.cmp(&y.price_cents),
            "stock" => x.stock.cmp(&y.stock),
            _ => std::cmp::Ordering::Equal,
        };
        c.then(x.id.cmp(&y.id))
    });

    let mut b = Vec::with_capacity(40 << 10);
    b.extend_from_slice(HEAD.as_bytes());
    b.extend_from_slice(b"<p>Hello, ");
    html(&mut b, &user);
    b.extend_from_slice(b"! You asked for <code>");
    html(&mut b, req.path);
    let _ = writeln!(b, "</code>; sorted by {sort}.</p>");
    b.extend_from_slice(
        b"<table>\n<thead><tr><th>#</th><th>Name</th><th>Category</th><th>SKU</th>\
          <th>Price</th><th>Stock</th></tr></thead>\n<tbody>\n",
    );
    let (mut items, mut value) = (0i64, 0i64);
    for p in order {
        let _ = write!(b, "<tr><td class=\"num\">{}</td><td>", p.id);
        html(&mut b, &p.name);
        b.extend_from_slice(b"</td><td>");
        html(&mut b, &p.category);
        b.extend_from_slice(b"</td><td><code>");
        html(&mut b, &p.sku);
        let _ = writeln!(
            b,
            "</code></td><td class=\"num\">${}.{:02}</td><td class=\"num\">{}</td></tr>",
            p.price_cents / 100,
            p.price_cents % 100,
            p.stock
        );
        items += p.stock;
        value += p.price_cents * p.stock;
    }
    let _ = write!(
        b,
        "</tbody>\n</table>\n<p>{} products; {} items in stock, worth ${}.{:02}.</p>\n",
        products.len(),
        items,
        value / 100,
        value % 100
    );
    b.extend_from_slice(b"</body>\n</html>\n");
    b
}

extern "C" fn handle(raw: *const abi::Request) {
    // SAFETY: `raw` is the request forkvm (or the native shim) passed for this call.
    let req = unsafe { Request::from_raw(raw) };
    let products = PRODUCTS.get().map(Vec::as_slice).unwrap_or(&[]);
    let page = render(products, &req);
    respond(200, b"Content-Type: text/html; charset=utf-8", &page);
}

fn main() {
    let products = match std::env::args().nth(1) {
        Some(path) => match load(&path) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{path}: {e}");
                eprintln!("render: cannot load the products");
                std::process::exit(1);
            }
        },
        None => generate(),
    };
    let n = products.len();
    let _ = PRODUCTS.set(products);
    serve(handle);
    eprintln!("render: {n} products loaded; serve me with `forkvm serve`");
}
