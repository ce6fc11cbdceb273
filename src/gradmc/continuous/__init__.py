"""Continuous-space kernels: RWM, MALA/ULA, SGLD, AM, HMC/NUTS (BlackJAX), gad."""
