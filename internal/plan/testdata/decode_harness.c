/* A harness of warden-exec's plan_decode for TestDecodeAsGo (internal/plan):
 * built with the sanitizers beside cmd/warden-exec/plan.c, it reads
 * records from stdin (a u32 little-endian length, then that many bytes)
 * and prints one line for each: "ok N" (N ops) or "bad I" (the op index
 * plan_decode stopped at, -1 before the first). Each input is copied to a
 * buffer of exactly its size, so a read past it is caught. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void plan_free(struct plan *p)
{
	uint32_t i, j;

	for (i = 0; p->ops && i < p->nops; i++) {
		struct op *op = &p->ops[i];
		for (j = 0; op->strs && j < op->nstrs; j++)
			free(op->strs[j]);
		free(op->strs);
		free(op->intv);
	}
	free(p->ops);
}

int main(void)
{
	unsigned char hdr[4];

	while (fread(hdr, 1, 4, stdin) == 4) {
		uint32_t len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
		unsigned char *buf = malloc(len ? len : 1);
		struct plan p = {0, NULL};
		int32_t bad;

		if (!buf || fread(buf, 1, len, stdin) != len)
			return 2;
		if (plan_decode(buf, len, &p, &bad) == 0)
			printf("ok %u\n", p.nops);
		else
			printf("bad %d\n", bad);
		plan_free(&p);
		free(buf);
	}
	return 0;
}
