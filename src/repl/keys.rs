//! Terminal input bytes to keys: UTF-8 characters, control keys, the escape sequences of the
//! common terminals (xterm, VT220, rxvt, tmux/screen), and bracketed pastes. Bytes that are not
//! UTF-8 and sequences it does not know are skipped and reported, never inserted.

/// One key press, or one paste.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Key {
    Char(char),
    /// Ctrl with a letter (lower case), or `@ [ \ ] ^ _` for the other control bytes.
    Ctrl(char),
    /// Alt (Meta) with a character.
    Alt(char),
    Enter,
    AltEnter,
    Tab,
    BackTab,
    Backspace,
    AltBackspace,
    Delete,
    Left,
    Right,
    Up,
    Down,
    Home,
    End,
    WordLeft,
    WordRight,
    PageUp,
    PageDown,
    Escape,
    /// A bracketed paste: its text, line ends as `\n`, without control characters but tabs.
    Paste(String),
    /// Bytes that were not UTF-8 (skipped).
    Invalid,
    /// An escape sequence with no meaning here (skipped).
    Unknown,
}

const PASTE_END: &[u8] = b"\x1b[201~";

/// Turns bytes into keys. Sequences split across reads wait for the rest: `next(false)` returns
/// `None` while one is incomplete; `next(true)` (no more bytes came in time) settles it.
#[derive(Default)]
pub(super) struct Decoder {
    buf: Vec<u8>,
    /// Inside a bracketed paste: the bytes so far.
    paste: Option<Vec<u8>>,
    /// A paste held back while `Invalid` reports the bytes it dropped.
    queued: Option<Key>,
}

enum Parsed {
    Key(Key, usize),
    Incomplete,
}

impl Decoder {
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// True when bytes are waiting (a partial sequence or paste).
    pub(super) fn pending(&self) -> bool {
        !self.buf.is_empty() || self.paste.is_some() || self.queued.is_some()
    }

    /// The next key, if the bytes so far make one. `settle`: no more bytes are coming soon, so an
    /// incomplete sequence is taken as what it is so far (a lone ESC is Escape).
    pub(super) fn next(&mut self, settle: bool) -> Option<Key> {
        if let Some(k) = self.queued.take() {
            return Some(k);
        }
        if let Some(mut p) = self.paste.take() {
            match find(&self.buf, PASTE_END) {
                Some(i) => {
                    p.extend_from_slice(&self.buf[..i]);
                    self.buf.drain(..i + PASTE_END.len());
                    let (text, valid) = paste_text(&p);
                    if valid {
                        return Some(Key::Paste(text));
                    }
                    // Reported as typed bytes are, then pasted without them.
                    self.queued = Some(Key::Paste(text));
                    return Some(Key::Invalid);
                }
                None => {
                    // Keep a tail that may be the start of the end marker.
                    let keep = (PASTE_END.len() - 1).min(self.buf.len());
                    let cut = self.buf.len() - keep;
                    p.extend_from_slice(&self.buf[..cut]);
                    self.buf.drain(..cut);
                    self.paste = Some(p);
                    return None;
                }
            }
        }
        if self.buf.is_empty() {
            return None;
        }
        match parse(&self.buf, settle) {
            Parsed::Incomplete => None,
            Parsed::Key(k, n) => {
                self.buf.drain(..n);
                if matches!(&k, Key::Paste(t) if t.is_empty()) {
                    // The start marker: collect until the end marker.
                    self.paste = Some(Vec::new());
                    return self.next(settle);
                }
                Some(k)
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A paste's bytes as text: CR LF and CR become LF; invalid UTF-8 and control characters other
/// than LF and TAB are dropped. False when there was invalid UTF-8.
fn paste_text(bytes: &[u8]) -> (String, bool) {
    let mut s = String::with_capacity(bytes.len());
    let mut valid = true;
    for chunk in bytes.utf8_chunks() {
        s.push_str(chunk.valid());
        valid &= chunk.invalid().is_empty();
    }
    let s = s.replace("\r\n", "\n").replace('\r', "\n");
    let text = s
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect();
    (text, valid)
}

/// Length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
fn utf8_len(b: u8) -> usize {
    match b {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

fn parse(b: &[u8], settle: bool) -> Parsed {
    let c = b[0];
    match c {
        0x1b => parse_escape(b, settle),
        b'\r' => Parsed::Key(Key::Enter, 1),
        b'\n' => Parsed::Key(Key::Ctrl('j'), 1),
        b'\t' => Parsed::Key(Key::Tab, 1),
        0x7f | 0x08 => Parsed::Key(Key::Backspace, 1),
        0x00 => Parsed::Key(Key::Ctrl('@'), 1),
        0x01..=0x1a => Parsed::Key(Key::Ctrl((b'a' + c - 1) as char), 1),
        0x1c..=0x1f => Parsed::Key(Key::Ctrl((b'\\' + c - 0x1c) as char), 1),
        _ => {
            let n = utf8_len(c);
            if n == 0 {
                return Parsed::Key(Key::Invalid, 1);
            }
            if b.len() < n {
                // Continuation bytes so far must be valid to wait for the rest.
                if b[1..].iter().all(|&x| x & 0xc0 == 0x80) && !settle {
                    return Parsed::Incomplete;
                }
                return Parsed::Key(Key::Invalid, 1);
            }
            match std::str::from_utf8(&b[..n]) {
                Ok(s) => match s.chars().next() {
                    Some(ch) => Parsed::Key(Key::Char(ch), n),
                    None => Parsed::Key(Key::Invalid, 1),
                },
                Err(_) => Parsed::Key(Key::Invalid, 1),
            }
        }
    }
}

fn parse_escape(b: &[u8], settle: bool) -> Parsed {
    let Some(&c) = b.get(1) else {
        return if settle {
            Parsed::Key(Key::Escape, 1)
        } else {
            Parsed::Incomplete
        };
    };
    match c {
        b'[' => parse_csi(b, settle),
        b'O' => match b.get(2) {
            None if settle => Parsed::Key(Key::Alt('O'), 2),
            None => Parsed::Incomplete,
            Some(&f) => Parsed::Key(
                match f {
                    b'A' => Key::Up,
                    b'B' => Key::Down,
                    b'C' => Key::Right,
                    b'D' => Key::Left,
                    b'H' => Key::Home,
                    b'F' => Key::End,
                    b'M' => Key::Enter,
                    // rxvt's Ctrl-arrows.
                    b'c' => Key::WordRight,
                    b'd' => Key::WordLeft,
                    _ => Key::Unknown,
                },
                3,
            ),
        },
        b'\r' | b'\n' => Parsed::Key(Key::AltEnter, 2),
        0x7f | 0x08 => Parsed::Key(Key::AltBackspace, 2),
        0x1b => Parsed::Key(Key::Escape, 1),
        0x20..=0x7e => Parsed::Key(Key::Alt(c as char), 2),
        _ => Parsed::Key(Key::Escape, 1),
    }
}

/// `ESC [ params intermediates final`.
fn parse_csi(b: &[u8], settle: bool) -> Parsed {
    let mut i = 2;
    while i < b.len() && (0x30..=0x3f).contains(&b[i]) {
        i += 1;
    }
    while i < b.len() && (0x20..=0x2f).contains(&b[i]) {
        i += 1;
    }
    let Some(&fin) = b.get(i) else {
        return if settle {
            Parsed::Key(Key::Unknown, b.len())
        } else {
            Parsed::Incomplete
        };
    };
    let n = i + 1;
    if !(0x40..=0x7e).contains(&fin) {
        // Not a sequence after all: drop the introducer only.
        return Parsed::Key(Key::Unknown, 2);
    }
    let params = std::str::from_utf8(&b[2..i]).unwrap_or("");
    let nums: Vec<u32> = params.split(';').map(|p| p.parse().unwrap_or(0)).collect();
    // The modifier parameter: 1 + (shift 1, alt 2, ctrl 4).
    let modifier = nums.get(1).copied().unwrap_or(1).saturating_sub(1);
    let word = modifier & 0b110 != 0;
    let key = match fin {
        b'A' => Key::Up,
        b'B' => Key::Down,
        b'C' if word => Key::WordRight,
        b'D' if word => Key::WordLeft,
        b'C' => Key::Right,
        b'D' => Key::Left,
        b'H' => Key::Home,
        b'F' => Key::End,
        b'Z' => Key::BackTab,
        b'~' => match nums.first().copied().unwrap_or(0) {
            1 | 7 => Key::Home,
            4 | 8 => Key::End,
            3 => Key::Delete,
            5 => Key::PageUp,
            6 => Key::PageDown,
            // The paste start; the decoder collects up to the end marker.
            200 => Key::Paste(String::new()),
            _ => Key::Unknown,
        },
        _ => Key::Unknown,
    };
    Parsed::Key(key, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<Key> {
        let mut d = Decoder::default();
        d.feed(bytes);
        let mut out = Vec::new();
        while let Some(k) = d.next(true) {
            out.push(k);
        }
        out
    }

    #[test]
    fn characters_and_controls() {
        assert_eq!(
            keys("aé中\r\t\x7f\x01\x17\n".as_bytes()),
            vec![
                Key::Char('a'),
                Key::Char('é'),
                Key::Char('中'),
                Key::Enter,
                Key::Tab,
                Key::Backspace,
                Key::Ctrl('a'),
                Key::Ctrl('w'),
                Key::Ctrl('j'),
            ]
        );
    }

    #[test]
    fn escape_sequences() {
        assert_eq!(
            keys(b"\x1b[D\x1bOC\x1b[1;5C\x1b[1;3D\x1b[3~\x1b[H\x1b[4~\x1bb\x1b\r\x1b\x7f\x1b[Z"),
            vec![
                Key::Left,
                Key::Right,
                Key::WordRight,
                Key::WordLeft,
                Key::Delete,
                Key::Home,
                Key::End,
                Key::Alt('b'),
                Key::AltEnter,
                Key::AltBackspace,
                Key::BackTab,
            ]
        );
    }

    #[test]
    fn unknown_sequences_and_invalid_bytes_are_skipped_whole() {
        assert_eq!(
            keys(b"a\x1b[99;7zb\xff\xc3c\x1b[?1;2cd"),
            vec![
                Key::Char('a'),
                Key::Unknown,
                Key::Char('b'),
                Key::Invalid,
                Key::Invalid,
                Key::Char('c'),
                Key::Unknown,
                Key::Char('d'),
            ]
        );
    }

    #[test]
    fn split_sequences_wait_for_the_rest() {
        let mut d = Decoder::default();
        d.feed(b"\x1b[");
        assert_eq!(d.next(false), None);
        d.feed(b"1;5");
        assert_eq!(d.next(false), None);
        d.feed(b"D\xe4\xb8");
        assert_eq!(d.next(false), Some(Key::WordLeft));
        assert_eq!(d.next(false), None);
        d.feed(b"\xad");
        assert_eq!(d.next(false), Some(Key::Char('中')));
        d.feed(b"\x1b");
        assert_eq!(d.next(false), None);
        assert_eq!(d.next(true), Some(Key::Escape));
    }

    #[test]
    fn bracketed_paste_is_one_key_across_reads() {
        let mut d = Decoder::default();
        d.feed(b"x\x1b[200~line one\r\nline\ttwo\x1b[A\n");
        assert_eq!(d.next(false), Some(Key::Char('x')));
        assert_eq!(d.next(false), None);
        d.feed(b"\xffthree\x1b[20");
        assert_eq!(d.next(false), None);
        d.feed(b"1~y");
        // The dropped byte is reported first, as a typed one is.
        assert_eq!(d.next(false), Some(Key::Invalid));
        assert!(d.pending());
        assert_eq!(
            d.next(false),
            Some(Key::Paste("line one\nline\ttwo[A\nthree".into()))
        );
        assert_eq!(d.next(false), Some(Key::Char('y')));
        assert!(!d.pending());
        // A valid paste keeps a replacement character of its own.
        d.feed("\x1b[200~a\u{fffd}b\x1b[201~".as_bytes());
        assert_eq!(d.next(false), Some(Key::Paste("a\u{fffd}b".into())));
    }
}
