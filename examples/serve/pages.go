package main

import (
	"fmt"
	"math/rand/v2"
)

// pagePool hands out the cache's pages. A request reserves, when it is
// admitted, every page it can come to need (its prompt and generated
// tokens), and takes them one by one as its cache grows, so an admitted
// request never waits for a page and none is ever preempted; what it
// reserved and did not take comes back with its pages when it finishes.
type pagePool struct {
	free     []int32 // pages nobody holds, taken from the end
	reserved int     // pages promised to running requests and not yet taken
	total    int
}

// newPagePool is a pool of n pages in a shuffled order, so that from the
// start a sequence's pages lie scattered over the cache as they come to
// after requests have come and gone.
func newPagePool(n int, rng *rand.Rand) *pagePool {
	p := &pagePool{free: make([]int32, n), total: n}
	for i := range p.free {
		p.free[i] = int32(i)
	}
	rng.Shuffle(n, func(i, j int) { p.free[i], p.free[j] = p.free[j], p.free[i] })
	return p
}

// reserve promises n pages, if that many are free and unpromised.
func (p *pagePool) reserve(n int) bool {
	if len(p.free)-p.reserved < n {
		return false
	}
	p.reserved += n
	return true
}

// take hands out a page of a reservation.
func (p *pagePool) take() (int32, error) {
	if p.reserved == 0 || len(p.free) == 0 {
		return 0, fmt.Errorf("page pool: a page taken beyond the reservations (%d free, %d reserved)", len(p.free), p.reserved)
	}
	pg := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.reserved--
	return pg, nil
}

// release returns a finished request's pages and the part of its
// reservation it did not take.
func (p *pagePool) release(pages []int32, untaken int) {
	p.free = append(p.free, pages...)
	p.reserved -= untaken
}

// inUse is the number of pages held by requests.
func (p *pagePool) inUse() int { return p.total - len(p.free) }
