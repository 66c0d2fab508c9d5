/* Vectorized exp, tanh and the sigmoid-type pieces of the activations, written once against the
 * vf_* layer (include simd_avx512.h or simd_avx2.h first). Coefficients are our own weighted
 * least-squares (Lawson) fits, rounded to float; measured errors are in tests/test_kernels.c and
 * kernels.h.
 *
 * exp(x): x = n ln2 + r, |r| <= ln2/2 (Cody-Waite with a two-part ln2; with FMA the first step
 *   is exact), e^r = 1 + r + r^2 q(r) with q of degree 4 (fit relative error 3e-9), then
 *   scaled by 2^n. x is clamped to [-110, 88.8] first, so -inf gives 0, +inf gives inf, results
 *   below FLT_MIN come out as (gradual) denormals, and NaN stays NaN (the clamp keeps it).
 *   Measured: <= 2 ulp relative for normal results.
 * tanh(x): |x| < 0.625: x + x^3 p(x^2), p of degree 4 (fit relative error 4e-9); otherwise
 *   sign(x) (1 - 2 / (exp(2|x|) + 1)) (no cancellation beyond a factor 1.25 at the switch). */
#ifndef TS_VMATH_BODY_H
#define TS_VMATH_BODY_H

static inline vf vm_exp(vf x) {
  x = vf_max(vf_set1(-110.0f), vf_min(vf_set1(88.8f), x)); /* NaN passes through both */
  vf n = vf_round(vf_mul(x, vf_set1(1.44269504088896341f)));
  vf r = vf_fnmadd(n, vf_set1(0.693145751953125f), x); /* ln2 high part: 16 bits, exact product */
  r = vf_fnmadd(n, vf_set1(1.42860682030941723e-6f), r); /* ln2 - high part */
  vf q = vf_set1(0.0013814604608342052f);
  q = vf_fmadd(q, r, vf_set1(0.008368710987269878f));
  q = vf_fmadd(q, r, vf_set1(0.04166838899254799f));
  q = vf_fmadd(q, r, vf_set1(0.1666652113199234f));
  q = vf_fmadd(q, r, vf_set1(0.4999999403953552f));
  vf p = vf_fmadd(vf_mul(r, r), q, vf_add(r, vf_set1(1.0f)));
  return vf_ldexp(p, n);
}

static inline vf vm_tanh(vf x) {
  vf ax = vf_abs(x);
  /* small: x + x^3 p(x^2) */
  vf s = vf_mul(x, x);
  vf p = vf_set1(-0.005704986862838268f);
  p = vf_fmadd(p, s, vf_set1(0.0206390880048275f));
  p = vf_fmadd(p, s, vf_set1(-0.05373971536755562f));
  p = vf_fmadd(p, s, vf_set1(0.13331441581249237f));
  p = vf_fmadd(p, s, vf_set1(-0.3333328068256378f));
  vf small = vf_fmadd(vf_mul(x, s), p, x);
  /* large: 1 - 2 / (e^{2|x|} + 1) */
  vf e = vm_exp(vf_add(ax, ax));
  vf big = vf_sub(vf_set1(1.0f), vf_div(vf_set1(2.0f), vf_add(e, vf_set1(1.0f))));
  big = vf_copysign(big, x);
  return vf_select(vf_lt(ax, vf_set1(0.625f)), small, big);
}

/* x * sigmoid(a) for the gates of SiLU (a = x) and tanh-GELU (a = 2u): with E = exp(-|a|) <= 1,
 * sigmoid(a) = 1/(1+E) for a >= 0 and E/(1+E) for a < 0, so nothing overflows and small
 * outputs keep their relative accuracy. x is clamped below at -1e4 first only so that x = -inf
 * gives -0 instead of -inf * 0 = NaN (for x < -1e4 the gate is 0 anyway). */
static inline vf vm_x_sigmoid(vf x, vf a) {
  vf E = vm_exp(vf_sub(vf_zero(), vf_abs(a)));
  vf num = vf_select(vf_ge(a, vf_zero()), vf_set1(1.0f), E);
  vf g = vf_div(num, vf_add(vf_set1(1.0f), E));
  return vf_mul(vf_max(vf_set1(-1e4f), x), g);
}

/* GELU, erf form: x * Phi(x) = x * erfc(z) / 2 with z = -x / sqrt(2).
 * erfc(|z|) = t exp(-z^2 + P(t)), t = 1 / (1 + |z|/2), P of degree 9 (our fit on z in [0, 11.3],
 * 1.2e-7 error in the exponent = relative error of erfc); erfc(z) = 2 - erfc(|z|) for z < 0.
 * The exponent is formed with one FMA (P - (x/2) x), so z^2 is not rounded on its own. */
static inline vf vm_gelu_erf(vf x) {
  vf z = vf_mul(x, vf_set1(-0.70710678118654752f));
  vf az = vf_abs(z);
  vf t = vf_div(vf_set1(1.0f), vf_fmadd(az, vf_set1(0.5f), vf_set1(1.0f)));
  vf P = vf_set1(0.1672099083662033f);
  P = vf_fmadd(P, t, vf_set1(-0.7983139157295227f));
  P = vf_fmadd(P, t, vf_set1(1.4234660863876343f));
  P = vf_fmadd(P, t, vf_set1(-1.0373480319976807f));
  P = vf_fmadd(P, t, vf_set1(0.1895454376935959f));
  P = vf_fmadd(P, t, vf_set1(-0.1351611316204071f));
  P = vf_fmadd(P, t, vf_set1(0.07853180170059204f));
  P = vf_fmadd(P, t, vf_set1(0.37798386812210083f));
  P = vf_fmadd(P, t, vf_set1(0.9995774626731873f));
  P = vf_fmadd(P, t, vf_set1(-1.2654913663864136f));
  /* -z^2 + P = P - (x/2) x: x/2 is exact, so the exponent is rounded once, and z's own
   * rounding (which would add a relative error of about x^2 u) stays out of it */
  vf arg = vf_fnmadd(vf_mul(x, vf_set1(0.5f)), x, P);
  vf half_e = vf_mul(vf_mul(t, vf_set1(0.5f)), vm_exp(arg)); /* erfc(|z|)/2 */
  /* z >= 0 (x <= 0): Phi = erfc(|z|)/2; z < 0: Phi = 1 - erfc(|z|)/2 */
  vf phi = vf_select(vf_ge(z, vf_zero()), half_e, vf_sub(vf_set1(1.0f), half_e));
  return vf_mul(vf_max(vf_set1(-1e4f), x), phi);
}

#endif
