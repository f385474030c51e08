"""Probe: enum value by meaning: max cosine between each value's words and the request's 1-3-grams."""
import json, re, sys
import numpy as np
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.arguments.cues import STOPWORDS
E = Embedder()
def grams(text):
    words = re.findall(r"[A-Za-z][\w'-]*", text)
    out = set()
    for n in (1, 2, 3):
        for k in range(len(words) - n + 1):
            g = words[k:k + n]
            if all(w.lower() in STOPWORDS for w in g): continue
            out.add(" ".join(g))
    return sorted(out)
def probe(values, text, gold=None):
    vs = [re.sub(r"[_\-]+", " ", str(v)) for v in values]
    gs = grams(text)
    V = E.embed(vs); G = E.embed(gs)
    S = V @ G.T
    best = S.max(axis=1); arg = S.argmax(axis=1)
    order = np.argsort(-best)
    top, second = order[0], order[1] if len(order) > 1 else None
    print(f"gold={gold} top={values[top]} {best[top]:.2f} ('{gs[arg[top]]}') 2nd={values[second]} {best[second]:.2f} ('{gs[arg[second]]}')")
cases = [
 (["insured_request","sold_home","nonpayment","underwriting","moved_out_of_state","other"], "The insured on POL-5520987 sold the house, please cancel the homeowners policy effective June 30, 2027 with a pro-rata refund.", "sold_home"),
 (["lost","stolen","damaged","upgrade"], "my phone got robbed on the bus on March 3rd 2027!! imei is 356938035643809 pls block it asap", "stolen"),
 (["am","pm","all_day"], "Book a fibre-to-the-home installation for ACC-58800213 at A94 E2K7 on the 5th of May, 2027, morning slot please.", "am"),
 (["email","sms","phone","mail"], "customer CUS-583920 has a new cell, 415.555.0142, and a new email maria.lopez@example.net. oh and she'd rather get texts than calls from now on", "sms"),
 (["new_business","renewal","claim"], "MVR 5yr lookback: Priya Shah, FL DL S530482916550, DOB 11/03/1988, new biz", "new_business"),
 (["declarations_page","auto_id_cards","policy_jacket","billing_statement"], "email the dec page + ID cards for POL-4471190 to the insured at tom.becker@example.com thx", "declarations_page"),
 (["volte","vowifi","5g_sa","esim"], "does IMEI 490154203237518 support volte and wifi calling", "vowifi"),
 (["no_signal","dropped_calls","slow_data","no_internet"], "calls keep droping at my house since about 08:45 UTC on 14 March 2027", "dropped_calls"),
 (["customer_request","duplicate_booking","goods_not_ready","rate_dispute","other"], "Please cancel SHP-118206, sales booked it twice by mistake.", "duplicate_booking"),
 (["scheduled","provider_unavailable","patient_request","weather"], "Dr. Okafor is out sick today, so cancel appointment APT-771455 and text the patient", "provider_unavailable"),
 # negatives: the request does not say any
 (["am","pm","all_day"], "Book a fibre install for ACC-58800213 on May 5th 2027", None),
 (["email","sms","phone","mail"], "my email changed, its now aoife.byrne@examplemail.ie — account ACC-77310456", None),
 (["lost","stolen","damaged","upgrade"], "esim swap for 00353 85 220 9917 please", None),
 (["standard","rush","same_day"], "release SO-730118 for picking at WH-ATL2", None),
]
for values, text, gold in cases: probe(values, text, gold)
