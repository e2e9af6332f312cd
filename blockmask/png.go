package blockmask

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
)

// Colours of the picture.
var (
	ColorFull    = color.RGBA{0x1f, 0x3b, 0x8c, 0xff} // dark blue
	ColorPartial = color.RGBA{0x8f, 0xbc, 0xf0, 0xff} // light blue
	ColorEmpty   = color.RGBA{0xff, 0xff, 0xff, 0xff} // white
	colorBG      = color.RGBA{0xe4, 0xe4, 0xe4, 0xff} // margins
	colorLine    = color.RGBA{0xc8, 0xc8, 0xc8, 0xff} // cell separators on empty cells
	colorText    = color.RGBA{0x20, 0x20, 0x20, 0xff}
)

// Layout of the picture, in pixels.
const (
	pngPad    = 8 // margin around and between panels
	pngScale  = 2 // of the 3×5 font
	pngTextH  = 5 * pngScale
	pngLabelH = pngTextH + 4 // a panel's title above it
)

// PNG draws the block grid: one panel per distinct (b, h) mask (masks that
// are equal share a panel, titled by the first (b, h) and how many more),
// query blocks top to bottom, key blocks left to right, cellPx pixels a
// block; full blocks dark blue, partial light blue, empty white; a legend
// bar below. Panels go in rows of ceil(sqrt(n)). With cellPx ≥ 6, cells are
// separated by a 1-pixel line.
//
// The image is W×H with panel size pw = NumK·cellPx, ph = NumQ·cellPx, c
// columns and r rows of panels: W = max(pad + c·(pw+pad), legend width +
// 2·pad), H = pad + r·(label + ph + pad) + text height + pad, with pad = 8,
// label = 14 and text height = 10.
func PNG(w io.Writer, bm *BlockMask, cellPx int) error {
	img, err := Image(bm, cellPx)
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// Image is PNG's picture, for callers that compose or re-encode it.
func Image(bm *BlockMask, cellPx int) (*image.RGBA, error) {
	if cellPx < 1 {
		return nil, fmt.Errorf("blockmask: cell size %d px, want at least 1", cellPx)
	}
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("blockmask: cannot draw an invalid block mask: %w", err)
	}
	g := bm.Grid()
	panels := distinctPanels(g)
	cols := int(math.Ceil(math.Sqrt(float64(len(panels)))))
	rows := (len(panels) + cols - 1) / cols
	pw, ph := g.NumK*cellPx, g.NumQ*cellPx
	legend := legendWidth()
	width := max(pngPad+cols*(pw+pngPad), legend+2*pngPad)
	height := pngPad + rows*(pngLabelH+ph+pngPad) + pngTextH + pngPad
	if int64(width)*int64(height) > 1<<27 {
		return nil, fmt.Errorf("blockmask: a %d×%d picture is too large; use a smaller cell size", width, height)
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, image.Rect(0, 0, width, height), colorBG)
	n := g.NumQ * g.NumK
	for i, p := range panels {
		x0 := pngPad + (i%cols)*(pw+pngPad)
		y0 := pngPad + (i/cols)*(pngLabelH+ph+pngPad)
		title := fmt.Sprintf("b%d h%d", p.b, p.h)
		if g.B*g.H == 1 {
			title = "all b h"
		}
		if p.more > 0 {
			title += fmt.Sprintf(" +%d", p.more)
		}
		drawText(img, x0, y0, title)
		y0 += pngLabelH
		cells := g.Classes[p.m*n:][:n]
		for qb := range g.NumQ {
			for kb := range g.NumK {
				r := image.Rect(x0+kb*cellPx, y0+qb*cellPx, x0+(kb+1)*cellPx, y0+(qb+1)*cellPx)
				c := cells[qb*g.NumK+kb]
				fill(img, r, classColor(c))
				if cellPx >= 6 {
					line := colorLine
					if c != Empty {
						line = ColorEmpty
					}
					fill(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), line)
					fill(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), line)
				}
			}
		}
	}
	// Legend: a swatch and a word per class.
	x, y := pngPad, height-pngPad-pngTextH
	for _, it := range legendItems {
		fill(img, image.Rect(x, y, x+pngTextH, y+pngTextH), classColor(it.c))
		outline(img, image.Rect(x, y, x+pngTextH, y+pngTextH), colorText)
		x += pngTextH + 4
		x = drawText(img, x, y, it.word) + 12
	}
	return img, nil
}

var legendItems = []struct {
	c    Class
	word string
}{{Full, "full"}, {Partial, "partial"}, {Empty, "empty"}}

func legendWidth() int {
	w := 0
	for _, it := range legendItems {
		w += pngTextH + 4 + textWidth(it.word) + 12
	}
	return w - 12
}

func classColor(c Class) color.RGBA {
	switch c {
	case Full:
		return ColorFull
	case Partial:
		return ColorPartial
	}
	return ColorEmpty
}

type panel struct {
	m, b, h, more int
}

// distinctPanels lists the (b, h) masks that differ, in order.
func distinctPanels(g *Grid) []panel {
	n := g.NumQ * g.NumK
	var out []panel
	for m := range g.B * g.H {
		cells := g.Classes[m*n:][:n]
		dup := false
		for i := range out {
			if slices.Equal(g.Classes[out[i].m*n:][:n], cells) {
				out[i].more++
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, panel{m: m, b: m / g.H, h: m % g.H})
		}
	}
	return out
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func outline(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	fill(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	fill(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	fill(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	fill(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// font is a 3×5 bitmap font for the few characters titles and the legend
// use; '#' is ink.
var font = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", ".##", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", ".#.", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'a': {"...", "##.", "..#", "###", "###"}, 'b': {"#..", "#..", "###", "#.#", "###"},
	'e': {"...", "###", "###", "#..", "###"}, 'f': {".##", "#..", "###", "#..", "#.."},
	'h': {"#..", "#..", "###", "#.#", "#.#"}, 'i': {".#.", "...", ".#.", ".#.", ".#."},
	'l': {"#..", "#..", "#..", "#..", ".##"}, 'm': {"...", "###", "###", "#.#", "#.#"},
	'p': {"...", "###", "#.#", "###", "#.."}, 'r': {"...", "#.#", "##.", "#..", "#.."},
	't': {".#.", "###", ".#.", ".#.", ".##"}, 'u': {"...", "#.#", "#.#", "#.#", "###"},
	'y': {"...", "#.#", "###", "..#", "##."}, '+': {"...", ".#.", "###", ".#.", "..."},
	' ': {"...", "...", "...", "...", "..."},
}

func textWidth(s string) int { return len(s) * 4 * pngScale }

// drawText writes s at (x, y) and returns the x after it.
func drawText(img *image.RGBA, x, y int, s string) int {
	for _, ch := range strings.ToLower(s) {
		g, ok := font[ch]
		if !ok {
			g = font[' ']
		}
		for row, line := range g {
			for col, px := range line {
				if px == '#' {
					fill(img, image.Rect(x+col*pngScale, y+row*pngScale, x+(col+1)*pngScale, y+(row+1)*pngScale), colorText)
				}
			}
		}
		x += 4 * pngScale
	}
	return x
}
