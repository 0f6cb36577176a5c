"""Pure core of the gateway: prices, worst-case estimates, days, rate windows, circuit, outputs."""
