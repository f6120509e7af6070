package bench

import (
	"image"
	"image/color"
	"strings"
)

// A 3x5 pixel font for the PNG plot's labels (upper case, digits and a few
// signs): enough to read a plot without a font package.
var glyphs = map[rune][5]uint8{
	'0': {0b111, 0b101, 0b101, 0b101, 0b111}, '1': {0b010, 0b110, 0b010, 0b010, 0b111},
	'2': {0b111, 0b001, 0b111, 0b100, 0b111}, '3': {0b111, 0b001, 0b111, 0b001, 0b111},
	'4': {0b101, 0b101, 0b111, 0b001, 0b001}, '5': {0b111, 0b100, 0b111, 0b001, 0b111},
	'6': {0b111, 0b100, 0b111, 0b101, 0b111}, '7': {0b111, 0b001, 0b001, 0b001, 0b001},
	'8': {0b111, 0b101, 0b111, 0b101, 0b111}, '9': {0b111, 0b101, 0b111, 0b001, 0b111},
	'.': {0, 0, 0, 0, 0b010}, ',': {0, 0, 0, 0b010, 0b100}, ':': {0, 0b010, 0, 0b010, 0},
	'%': {0b101, 0b001, 0b010, 0b100, 0b101}, '/': {0b001, 0b001, 0b010, 0b100, 0b100},
	'-': {0, 0, 0b111, 0, 0}, '=': {0, 0b111, 0, 0b111, 0}, '(': {0b010, 0b100, 0b100, 0b100, 0b010},
	')': {0b010, 0b001, 0b001, 0b001, 0b010}, ' ': {},
	'A': {0b010, 0b101, 0b111, 0b101, 0b101}, 'B': {0b110, 0b101, 0b110, 0b101, 0b110},
	'C': {0b011, 0b100, 0b100, 0b100, 0b011}, 'D': {0b110, 0b101, 0b101, 0b101, 0b110},
	'E': {0b111, 0b100, 0b110, 0b100, 0b111}, 'F': {0b111, 0b100, 0b110, 0b100, 0b100},
	'G': {0b011, 0b100, 0b101, 0b101, 0b011}, 'H': {0b101, 0b101, 0b111, 0b101, 0b101},
	'I': {0b111, 0b010, 0b010, 0b010, 0b111}, 'J': {0b001, 0b001, 0b001, 0b101, 0b010},
	'K': {0b101, 0b101, 0b110, 0b101, 0b101}, 'L': {0b100, 0b100, 0b100, 0b100, 0b111},
	'M': {0b101, 0b111, 0b111, 0b101, 0b101}, 'N': {0b110, 0b101, 0b101, 0b101, 0b101},
	'O': {0b010, 0b101, 0b101, 0b101, 0b010}, 'P': {0b110, 0b101, 0b110, 0b100, 0b100},
	'Q': {0b010, 0b101, 0b101, 0b110, 0b011}, 'R': {0b110, 0b101, 0b110, 0b101, 0b101},
	'S': {0b011, 0b100, 0b010, 0b001, 0b110}, 'T': {0b111, 0b010, 0b010, 0b010, 0b010},
	'U': {0b101, 0b101, 0b101, 0b101, 0b111}, 'V': {0b101, 0b101, 0b101, 0b101, 0b010},
	'W': {0b101, 0b101, 0b111, 0b111, 0b101}, 'X': {0b101, 0b101, 0b010, 0b101, 0b101},
	'Y': {0b101, 0b101, 0b010, 0b010, 0b010}, 'Z': {0b111, 0b001, 0b010, 0b100, 0b111},
}

func fontText(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "µ", "u"))
}

// textWidth is the width in pixels of s drawn at the given scale.
func textWidth(s string, scale int) int {
	n := len([]rune(fontText(s)))
	if n == 0 {
		return 0
	}
	return (4*n - 1) * scale
}

// drawText draws s with its top left corner at (x, y); unknown characters
// are drawn as a blank.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, r := range fontText(s) {
		g := glyphs[r]
		for row := range 5 {
			for col := range 3 {
				if g[row]&(0b100>>col) == 0 {
					continue
				}
				for dy := range scale {
					for dx := range scale {
						img.SetRGBA(x+col*scale+dx, y+row*scale+dy, c)
					}
				}
			}
		}
		x += 4 * scale
	}
}
