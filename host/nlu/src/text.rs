//! Tokenisation and normalisation for the NLU models.

use super::Lang;

/// A word (letters/digits run) or a single other non-space character of a text, with its
/// offsets: bytes for slicing, characters for the public API.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Lower-cased, as written otherwise.
    pub norm: String,
    pub byte_start: usize,
    pub byte_end: usize,
    pub char_start: usize,
    pub char_end: usize,
}

impl Token {
    pub fn is_word(&self) -> bool {
        self.norm.chars().next().is_some_and(char::is_alphanumeric)
    }
}

/// Splits `text` into tokens: runs of alphanumeric characters (with inner apostrophes, dots
/// or hyphens between alphanumerics kept, as in `don't`, `v1.2`, `e-mail`), and each other
/// non-whitespace character on its own.
pub fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (b, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_alphanumeric() {
            i += 1;
            while i < chars.len() {
                let c = chars[i].1;
                if c.is_alphanumeric() {
                    i += 1;
                } else if matches!(c, '\'' | '’' | '.' | '-' | '_')
                    && i + 1 < chars.len()
                    && chars[i + 1].1.is_alphanumeric()
                {
                    i += 2;
                } else {
                    break;
                }
            }
        } else {
            i += 1;
        }
        let byte_end = chars.get(i).map(|x| x.0).unwrap_or(text.len());
        out.push(Token {
            norm: text[b..byte_end].to_lowercase(),
            byte_start: b,
            byte_end,
            char_start: start,
            char_end: i,
        });
    }
    out
}

/// The lower-cased form used for matching and features.
pub fn normalize(word: &str, _lang: Lang) -> String {
    word.to_lowercase()
}

/// The stem of a lower-cased word: Snowball English (Porter 2) for [`Lang::En`], the rule
/// stemmer [`stem_id`] for [`Lang::Id`], the word itself otherwise. Words that are not purely
/// alphabetic (numbers, `v1.2`) are returned unchanged.
pub fn stem(word: &str, lang: Lang) -> String {
    match lang {
        Lang::En => {
            if !word
                .chars()
                .all(|c| c.is_alphabetic() || c == '\'' || c == '’')
            {
                return word.to_string();
            }
            EN_STEMMER.with(|s| s.stem(&word.replace('’', "'")).into_owned())
        }
        Lang::Id => stem_id(word),
        Lang::Other => word.to_string(),
    }
}

thread_local! {
    static EN_STEMMER: rust_stemmers::Stemmer =
        rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
}

/// Indonesian stemmer, dictionary-free in the Snowball-Indonesian (Tala) style with a
/// Nazief–Adriani-style check against a small built-in list of common roots.
///
/// The word is stripped, in this order, of a particle (`-lah -kah -tah -pun`), a possessive
/// (`-ku -mu -nya`), then — if no known root was reached — of its derivational affixes:
/// a first-order prefix (`di- ke- ter- me(N)- pe(N)-` with recoding: `meny-`→`s`, `mem-`+vowel
/// →`p`, `men-`+vowel→`t`, `meng-`+vowel→vowel), a suffix (`-kan -an -i`, not in the
/// combinations Indonesian morphology excludes: `di-/me-/ter-…-an`, `ke-…-i/-kan`, `ber-…-i`,
/// `pe-…-i/-kan`), and a second-order prefix (`ber- be- bel- per- pe- pel-`). Nothing is
/// stripped when the rest would have fewer than two vowels, the minimum Indonesian root.
///
/// Recoding is ambiguous without a dictionary (`memakan`: `makan`, `memakai`: `pakai`): every
/// analysis is searched (suffixes first, as Nazief–Adriani do) and the first that reaches a
/// root of [`ID_ROOTS`] wins; otherwise the default (Snowball-order) analysis is used.
/// Reduplications (`buku-buku`) stem as their first half when both halves are equal.
pub fn stem_id(word: &str) -> String {
    let w = word.to_lowercase();
    if let Some((a, b)) = w.split_once('-') {
        if a == b || stem_id(a) == stem_id(b) {
            return stem_id(a);
        }
        return w;
    }
    if w.is_empty() || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return w;
    }
    let mut w = w;
    for group in [&["lah", "kah", "tah", "pun"][..], &["nya", "ku", "mu"][..]] {
        // A known root reached without stripping this group wins (`bertanya` is `tanya`, not
        // `berta` + `-nya`).
        if let Some(root) = id_search(&w, 0, None, false) {
            return root;
        }
        if let Some(rest) = group
            .iter()
            .filter_map(|s| w.strip_suffix(s))
            .find(|r| id_ok(r))
        {
            w = rest.to_string();
        }
    }
    if let Some(root) = id_search(&w, 0, None, false) {
        return root;
    }
    id_default(&w)
}

/// Prefix kinds, for the excluded prefix–suffix pairs.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Pfx {
    /// di-, me(N)-, ter-: no `-an`.
    Di,
    /// ke-, se-: no `-i`, `-kan`.
    Ke,
    /// pe(N)-, per-: only `-an`.
    Pe,
    /// ber-: no `-i`.
    Ber,
}

fn vowels(s: &str) -> usize {
    s.bytes().filter(|b| b"aeiou".contains(b)).count()
}

fn is_vowel(b: Option<u8>) -> bool {
    b.is_some_and(|b| b"aeiou".contains(&b))
}

/// The least a stripped word must keep: two vowels and three letters.
fn id_ok(s: &str) -> bool {
    s.len() >= 3 && vowels(s) >= 2
}

fn is_root(s: &str) -> bool {
    ID_ROOTS.binary_search(&s).is_ok()
}

/// First-order prefix: its kind and the possible roots, the default first.
fn id_first_order(w: &str) -> Option<(Pfx, Vec<String>)> {
    let alt = |pre: &str, rest: &str| format!("{pre}{rest}");
    for (p, kind) in [("meng", Pfx::Di), ("peng", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p) {
            let b = r.bytes().next();
            if is_vowel(b) {
                return Some((kind, vec![r.into(), alt("k", r)]));
            }
            if b.is_some_and(|b| b"ghkq".contains(&b)) {
                return Some((kind, vec![r.into()]));
            }
        }
    }
    for (p, kind) in [("meny", Pfx::Di), ("peny", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p).filter(|r| is_vowel(r.bytes().next())) {
            return Some((kind, vec![alt("s", r), alt("ny", r)]));
        }
    }
    for (p, kind) in [("mem", Pfx::Di), ("pem", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p) {
            let b = r.bytes().next();
            if is_vowel(b) {
                return Some((kind, vec![alt("p", r), alt("m", r)]));
            }
            if b.is_some_and(|b| b"bfvp".contains(&b)) {
                return Some((kind, vec![r.into()]));
            }
        }
    }
    for (p, kind) in [("men", Pfx::Di), ("pen", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p) {
            let b = r.bytes().next();
            if is_vowel(b) {
                return Some((kind, vec![alt("t", r), alt("n", r)]));
            }
            if b.is_some_and(|b| b"cdjstz".contains(&b)) {
                return Some((kind, vec![r.into()]));
            }
        }
    }
    if let Some(r) = w.strip_prefix("me")
        && r.bytes().next().is_some_and(|b| b"lrwy".contains(&b))
    {
        return Some((Pfx::Di, vec![r.into()]));
    }
    if let Some(r) = w.strip_prefix("ter") {
        if is_vowel(r.bytes().next()) {
            return Some((Pfx::Di, vec![r.into(), alt("r", r)]));
        }
        return Some((Pfx::Di, vec![r.into()]));
    }
    if let Some(r) = w.strip_prefix("di") {
        return Some((Pfx::Di, vec![r.into()]));
    }
    if let Some(r) = w.strip_prefix("ke") {
        return Some((Pfx::Ke, vec![r.into()]));
    }
    None
}

/// Second-order prefix (ber-, per- and their variants).
fn id_second_order(w: &str) -> Option<(Pfx, Vec<String>)> {
    for (p, kind) in [("ber", Pfx::Ber), ("per", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p) {
            if is_vowel(r.bytes().next()) {
                return Some(if kind == Pfx::Ber {
                    (kind, vec![r.into(), format!("r{r}")])
                } else {
                    (kind, vec![format!("r{r}"), r.into()])
                });
            }
            return Some((kind, vec![r.into()]));
        }
    }
    for (p, kind) in [("bel", Pfx::Ber), ("pel", Pfx::Pe)] {
        if let Some(r) = w.strip_prefix(p).filter(|r| r.starts_with("ajar")) {
            return Some((kind, vec![r.into()]));
        }
    }
    if let Some(r) = w.strip_prefix("be") {
        // be- + C + er…: bekerja, beternak.
        let b = r.as_bytes();
        if b.len() > 3 && !is_vowel(Some(b[0])) && &b[1..3] == b"er" {
            return Some((Pfx::Ber, vec![r.into()]));
        }
    }
    if let Some(r) = w.strip_prefix("pe") {
        let b = r.bytes().next();
        if b.is_some_and(|b| !b"aeiourmn".contains(&b)) {
            return Some((Pfx::Pe, vec![r.into()]));
        }
    }
    None
}

/// The derivational suffix, if `outer` allows it.
fn id_suffix(w: &str, outer: Option<Pfx>) -> Option<String> {
    let kan = !matches!(outer, Some(Pfx::Ke | Pfx::Pe));
    let an = outer != Some(Pfx::Di);
    let i = !matches!(outer, Some(Pfx::Ke | Pfx::Pe | Pfx::Ber));
    let cands = [
        (kan, w.strip_suffix("kan")),
        (an, w.strip_suffix("an")),
        (i, w.strip_suffix('i').filter(|r| !r.ends_with('s'))),
    ];
    cands
        .into_iter()
        .filter_map(|(allowed, r)| r.filter(|r| allowed && id_ok(r)))
        .map(String::from)
        .next()
}

/// Depth-first search over all analyses for a known root.
fn id_search(w: &str, depth: usize, outer: Option<Pfx>, suffix_done: bool) -> Option<String> {
    if is_root(w) {
        return Some(w.to_string());
    }
    if depth >= 4 {
        return None;
    }
    if !suffix_done {
        for s in ["kan", "an", "i"] {
            if let Some(r) = w.strip_suffix(s).filter(|r| id_ok(r))
                && let Some(x) = id_search(r, depth + 1, outer, true)
            {
                return Some(x);
            }
        }
    }
    let mut options: Vec<(Pfx, Vec<String>)> = Vec::new();
    options.extend(id_first_order(w));
    options.extend(id_second_order(w));
    if let Some(r) = w.strip_prefix("se") {
        options.push((Pfx::Ke, vec![r.to_string()]));
    }
    for (kind, alts) in options {
        for r in alts.iter().filter(|r| id_ok(r)) {
            if let Some(x) = id_search(r, depth + 1, outer.or(Some(kind)), suffix_done) {
                return Some(x);
            }
        }
    }
    None
}

/// The default analysis (Snowball order): first-order prefix, suffix, second-order prefix;
/// without a first-order prefix, the second-order prefix goes before the suffix.
fn id_default(w: &str) -> String {
    let pick = |o: Option<(Pfx, Vec<String>)>| {
        o.and_then(|(k, alts)| alts.into_iter().find(|r| id_ok(r)).map(|r| (k, r)))
    };
    let mut w = w.to_string();
    if let Some((kind, r)) = pick(id_first_order(&w)) {
        w = r;
        if let Some(r) = id_suffix(&w, Some(kind)) {
            w = r;
        }
        if let Some((_, r)) = pick(id_second_order(&w)) {
            w = r;
        }
    } else {
        let mut outer = None;
        if let Some((kind, r)) = pick(id_second_order(&w)) {
            w = r;
            outer = Some(kind);
        }
        if let Some(r) = id_suffix(&w, outer) {
            w = r;
        }
    }
    w
}

/// Common Indonesian roots (sorted), written for this stemmer: roots that look prefixed or
/// suffixed (`terima`, `beli`, `makan`) and roots that settle ambiguous recodings
/// (`mem-`+vowel: `pakai`/`makan`; `meng-`+vowel: `ambil`/`kirim`; `men-`+vowel:
/// `tulis`/`nikah`; `meny-`: `sapu`/`nyanyi`).
pub const ID_ROOTS: &[&str] = &[
    "acara",
    "ada",
    "adik",
    "agar",
    "ahli",
    "air",
    "ajak",
    "ajar",
    "akan",
    "akhir",
    "aku",
    "alam",
    "alamat",
    "aman",
    "amat",
    "ambil",
    "anak",
    "angin",
    "angkat",
    "angkut",
    "antar",
    "antre",
    "apa",
    "arti",
    "asal",
    "atur",
    "awal",
    "baca",
    "bagi",
    "baik",
    "bakar",
    "balas",
    "baru",
    "batal",
    "bayar",
    "beda",
    "bekal",
    "belah",
    "belanja",
    "beli",
    "benar",
    "bentuk",
    "berangkat",
    "berapa",
    "berat",
    "berhenti",
    "beri",
    "berita",
    "beritahu",
    "bersih",
    "besar",
    "bicara",
    "bilang",
    "bisa",
    "buat",
    "buka",
    "buku",
    "bulan",
    "buruk",
    "cari",
    "cerita",
    "coba",
    "cuci",
    "daftar",
    "dapat",
    "datang",
    "dengar",
    "diam",
    "dingin",
    "diri",
    "dokter",
    "duduk",
    "ekor",
    "emas",
    "enak",
    "gambar",
    "ganti",
    "guna",
    "hadir",
    "hapus",
    "harap",
    "harga",
    "hari",
    "hasil",
    "hidup",
    "hilang",
    "hitung",
    "hubung",
    "ikan",
    "ikut",
    "inap",
    "ingat",
    "ingin",
    "isi",
    "izin",
    "jadi",
    "jalan",
    "jam",
    "jawab",
    "jemput",
    "jual",
    "kabar",
    "kacau",
    "kalah",
    "kali",
    "kamar",
    "kantor",
    "kapan",
    "karya",
    "kata",
    "kecil",
    "kejar",
    "kelas",
    "keluar",
    "keluarga",
    "kemarin",
    "kemas",
    "kembali",
    "kena",
    "kenal",
    "keras",
    "kereta",
    "kerja",
    "kira",
    "kirim",
    "kosong",
    "kumpul",
    "kunci",
    "kunjung",
    "kurang",
    "lagu",
    "lahir",
    "lain",
    "lama",
    "lambat",
    "lanjut",
    "lapor",
    "lari",
    "lihat",
    "lupa",
    "maaf",
    "main",
    "makan",
    "maksud",
    "malam",
    "malu",
    "mandi",
    "marah",
    "masak",
    "masalah",
    "masuk",
    "mati",
    "medan",
    "meja",
    "menang",
    "menit",
    "merah",
    "mereka",
    "milik",
    "mimpi",
    "minta",
    "minum",
    "mohon",
    "muat",
    "mudah",
    "mula",
    "mulai",
    "muncul",
    "mundur",
    "murah",
    "nama",
    "nanti",
    "nikah",
    "nilai",
    "nyala",
    "nyanyi",
    "nyata",
    "obat",
    "olah",
    "omong",
    "pagi",
    "pakai",
    "paket",
    "panas",
    "panggil",
    "pasang",
    "pergi",
    "perlu",
    "pernah",
    "pesan",
    "pikir",
    "pilih",
    "pimpin",
    "pindah",
    "pinjam",
    "pukul",
    "pulang",
    "punya",
    "putus",
    "rasa",
    "rumah",
    "sakit",
    "salah",
    "sama",
    "sampai",
    "sapu",
    "sayang",
    "sebab",
    "sedang",
    "sedia",
    "segera",
    "sehat",
    "sekolah",
    "selalu",
    "selamat",
    "selesai",
    "semua",
    "senang",
    "sepeda",
    "seperti",
    "sewa",
    "simpan",
    "sudah",
    "suka",
    "sulit",
    "tahu",
    "tambah",
    "tanya",
    "tarik",
    "taruh",
    "tawar",
    "telepon",
    "teman",
    "tempat",
    "temu",
    "tentu",
    "terang",
    "terbang",
    "terima",
    "terus",
    "tiba",
    "tidur",
    "tiket",
    "tinggal",
    "tolong",
    "tulis",
    "tunggu",
    "tutup",
    "ubah",
    "ulang",
    "umum",
    "undang",
    "untung",
    "urus",
    "usaha",
    "waktu",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_char_and_byte_offsets() {
        let t = tokenize("Kè Bandung, don't e-mail v1.2!");
        let words: Vec<&str> = t.iter().map(|t| t.norm.as_str()).collect();
        assert_eq!(
            words,
            ["kè", "bandung", ",", "don't", "e-mail", "v1.2", "!"]
        );
        assert_eq!((t[1].char_start, t[1].char_end), (3, 10));
        assert_eq!((t[1].byte_start, t[1].byte_end), (4, 11));
    }

    #[test]
    fn stems_english() {
        for (w, s) in [
            ("running", "run"),
            ("connections", "connect"),
            ("printers", "printer"),
            ("2024", "2024"),
        ] {
            assert_eq!(stem(w, Lang::En), s, "{w}");
        }
    }

    #[test]
    fn stems_indonesian() {
        for (w, s) in [
            ("memakan", "makan"),
            ("memakai", "pakai"),
            ("pembelian", "beli"),
            ("bukunya", "buku"),
            ("berjalan", "jalan"),
            ("makanan", "makan"),
            ("menulis", "tulis"),
            ("mengirimkan", "kirim"),
            ("mengambil", "ambil"),
            ("dibeli", "beli"),
            ("pertanyaan", "tanya"),
            ("kebersihan", "bersih"),
            ("berikan", "beri"),
            ("diperbaiki", "baik"),
            ("pemesanan", "pesan"),
            ("terbuka", "buka"),
            ("terima", "terima"),
            ("menyapu", "sapu"),
            ("bekerja", "kerja"),
            ("pelajaran", "ajar"),
            ("keberangkatan", "berangkat"),
            ("cobalah", "coba"),
            ("bertanya", "tanya"),
            ("bertemu", "temu"),
            ("memberitahukan", "beritahu"),
            ("keluarganya", "keluarga"),
            ("pengiriman", "kirim"),
            ("bukumu", "buku"),
            ("buku-buku", "buku"),
            ("jalan", "jalan"),
            ("beli", "beli"),
            ("pergi", "pergi"),
            // Not in the root list: the default analysis.
            ("menggoreng", "goreng"),
            ("pendaftaran", "daftar"),
            ("ditolak", "tolak"),
        ] {
            assert_eq!(stem(w, Lang::Id), s, "{w}");
        }
    }

    #[test]
    fn id_roots_are_sorted() {
        assert!(ID_ROOTS.windows(2).all(|w| w[0] < w[1]));
    }
}
