//! The font every plot's text is drawn with, embedded so that rendering needs no system fonts.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

/// DejaVu Sans (Bitstream Vera license, see `assets/fonts/DejaVuSans-LICENSE.txt`).
const DEJAVU_SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family name plots ask for; it resolves to the embedded font.
pub const FAMILY: &str = "sans-serif";

/// Registers the embedded font with plotters (once per process).
pub fn register() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok());
    anyhow::ensure!(ok, "the embedded plot font could not be loaded");
    Ok(())
}
