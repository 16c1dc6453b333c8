//! The AEADs a key of the ring can seal with, their flags in the key ring file and their bytes
//! in an envelope. Names and bytes are stored and documented: never renumber them.

use ring::aead;

/// The AEAD a key seals with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// AES-256-GCM (flag `aes-256-gcm`, the default).
    Aes256Gcm,
    /// ChaCha20-Poly1305 (flag `chacha20-poly1305`).
    ChaCha20Poly1305,
}

impl Algorithm {
    /// Its flag in the key ring file.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aes256Gcm => "aes-256-gcm",
            Algorithm::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// The algorithm a flag names.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "aes-256-gcm" => Some(Algorithm::Aes256Gcm),
            "chacha20-poly1305" => Some(Algorithm::ChaCha20Poly1305),
            _ => None,
        }
    }

    /// Its byte in an envelope.
    pub(crate) fn code(self) -> u8 {
        match self {
            Algorithm::Aes256Gcm => 1,
            Algorithm::ChaCha20Poly1305 => 2,
        }
    }

    /// The algorithm an envelope's byte names.
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Algorithm::Aes256Gcm),
            2 => Some(Algorithm::ChaCha20Poly1305),
            _ => None,
        }
    }

    pub(crate) fn aead(self) -> &'static aead::Algorithm {
        match self {
            Algorithm::Aes256Gcm => &aead::AES_256_GCM,
            Algorithm::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}
