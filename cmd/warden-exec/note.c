/* The plan version this build reads (PLAN_VERSION), as an ELF note the
 * host reads from the file without running it (internal/nsinit's
 * execVersion): owner "Warden", type 1, a u32 description. A plan of
 * another version is still refused, before its first op (plan_decode). */
#include "plan.h"

#define NOTE_STR2(x) #x
#define NOTE_STR(x) NOTE_STR2(x)

__asm__(".pushsection .note.warden,\"a\",@note\n"
	".balign 4\n"
	".long 7\n" /* the owner's size, with its NUL */
	".long 4\n" /* the description's size */
	".long 1\n" /* the note's type: the plan version */
	".asciz \"Warden\"\n"
	".balign 4\n"
	".long " NOTE_STR(PLAN_VERSION) "\n"
	".popsection\n");
