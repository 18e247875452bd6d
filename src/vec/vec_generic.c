/* vec_generic.c — the vector kernels at level generic: portable C, one
 * float a "vector" (vec_body.h), with SLEEF's portable scalar exp and tanh
 * (purec). Built for the architecture's baseline (on x86-64 without AVX), it
 * runs on any CPU; it is the level to compare the others with. */
#include <math.h>
#include <sleef.h>

typedef float vf;
#define V_W 1
#define V_LOAD(p)            (*(p))
#define V_STORE(p, v)        (*(p) = (v))
#define V_SET1(x)            (x)
#define V_ADD(a, b)          ((a) + (b))
#define V_SUB(a, b)          ((a) - (b))
#define V_MUL(a, b)          ((a) * (b))
#define V_DIV(a, b)          ((a) / (b))
#define V_SQRT(a)            sqrtf(a)
#define V_EXP(a)             Sleef_expf1_u10purec(a)
#define V_SEL_GT(a, b, x, y) ((a) > (b) ? (x) : (y))
#define V_SEL_NAN(a, x, y)   ((a) != (a) ? (x) : (y))
#define V_TABLE              mt__vec_ops_generic
#define V_ISA                MT_ISA_GENERIC

#include "vec/vec_body.h"
