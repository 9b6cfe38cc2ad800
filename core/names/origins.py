"""Name origins: Faker locales whose names are written in Latin script, with the country, language and cities a
person of that origin typically has (values taken from the catalog's pools for P27, P1412/P103 and P19).

Used two ways: to give a subject look-alike names *of the same origin* (so that what a model merely infers from a
name's origin — nationality, language, gender — shows in the calibration baseline and cancels), and to make the
null cohort realistic (fictitious people whose names fit their facts).

Name lists come from Faker (MIT licence; only its data modules are read, never its random generator, so the
lists are the same on every machine for a given Faker version). Japanese and Chinese names use Faker's romanized
lists; Russian, Ukrainian and Bulgarian names are transliterated from Cyrillic (a simplified BGN/PCGN table).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache

GENDERS = ("male", "female")


@dataclass(frozen=True)
class Origin:
    locale: str
    country: str  # a P27 pool value
    language: str  # a P1412 / P103 pool value
    cities: tuple[str, ...]  # P19 pool values in that country

    @property
    def region(self) -> str:
        """A naming tradition shared by several locales (Faker's lists overlap across them)."""
        return REGIONS.get(self.locale, self.locale)


def _o(locale: str, country: str, language: str, *cities: str) -> Origin:
    return Origin(locale, country, language, cities)


_REGION_LOCALES = {
    "anglophone": ("en_US", "en_GB", "en_IE", "en_NZ"),
    "germanic": ("de_DE", "de_AT", "de_CH", "nl_NL", "nl_BE"),
    "nordic": ("sv_SE", "no_NO", "da_DK", "fi_FI"),
    "francophone": ("fr_FR", "fr_BE", "fr_CH", "fr_CA"),
    "hispanic": ("es_ES", "es_CA", "es_MX", "es_AR", "es_CL", "es_CO"),
    "lusophone": ("pt_PT", "pt_BR"),
    "slavic": ("pl_PL", "cs_CZ", "hr_HR", "sl_SI", "ru_RU", "uk_UA", "bg_BG"),
    "baltic": ("lv_LV", "et_EE"),
    "african": ("en_KE", "yo_NG", "ig_NG", "ha_NG", "tw_GH", "zu_ZA"),
    "chinese": ("zh_CN", "zh_TW"),
}
REGIONS = {locale: region for region, locales in _REGION_LOCALES.items() for locale in locales}


US_CITIES = (
    "New York City",
    "Los Angeles",
    "Chicago",
    "Boston",
    "Philadelphia",
    "San Francisco",
    "Seattle",
    "Washington, D.C.",
    "Baltimore",
    "Detroit",
    "Cleveland",
    "Pittsburgh",
    "Atlanta",
    "Miami",
    "New Orleans",
    "Houston",
    "Dallas",
    "Denver",
    "Phoenix",
    "St. Louis",
    "Minneapolis",
)
ORIGINS: tuple[Origin, ...] = (
    _o("en_US", "United States", "English", *US_CITIES),
    _o(
        "en_GB",
        "United Kingdom",
        "English",
        "London",
        "Manchester",
        "Liverpool",
        "Birmingham",
        "Oxford",
        "Cambridge",
        "Edinburgh",
        "Glasgow",
    ),
    _o("en_IE", "Ireland", "English", "Dublin"),
    _o("en_NZ", "New Zealand", "English", "Auckland", "Wellington"),
    _o("en_IN", "India", "Hindi", "Mumbai", "Delhi", "Kolkata", "Chennai"),
    _o("en_KE", "Kenya", "Swahili", "Nairobi"),
    _o("yo_NG", "Nigeria", "Yoruba", "Lagos"),
    _o("ig_NG", "Nigeria", "Igbo", "Lagos"),
    _o("ha_NG", "Nigeria", "Hausa", "Lagos"),
    _o("tw_GH", "Ghana", "English", "Accra"),
    _o("zu_ZA", "South Africa", "Zulu", "Johannesburg", "Cape Town"),
    _o(
        "de_DE",
        "Germany",
        "German",
        "Berlin",
        "Munich",
        "Hamburg",
        "Frankfurt",
        "Cologne",
        "Leipzig",
        "Dresden",
        "Stuttgart",
    ),
    _o("de_AT", "Austria", "German", "Vienna"),
    _o("de_CH", "Switzerland", "German", "Zurich", "Basel"),
    _o("fr_CH", "Switzerland", "French", "Geneva"),
    _o("fr_FR", "France", "French", "Paris", "Lyon", "Marseille", "Bordeaux", "Toulouse", "Strasbourg"),
    _o("fr_BE", "Belgium", "French", "Brussels"),
    _o("nl_BE", "Belgium", "Dutch", "Brussels"),
    _o("fr_CA", "Canada", "French", "Montreal"),
    _o("fr_DZ", "Algeria", "Arabic", "Algiers"),
    _o("es_ES", "Spain", "Spanish", "Madrid", "Seville", "Valencia", "Barcelona"),
    _o("es_CA", "Spain", "Catalan", "Barcelona"),
    _o("es_MX", "Mexico", "Spanish", "Mexico City"),
    _o("es_AR", "Argentina", "Spanish", "Buenos Aires"),
    _o("es_CL", "Chile", "Spanish", "Santiago"),
    _o("es_CO", "Colombia", "Spanish", "Bogotá"),
    _o("it_IT", "Italy", "Italian", "Rome", "Milan", "Naples", "Turin", "Florence", "Venice"),
    _o("pt_PT", "Portugal", "Portuguese", "Lisbon", "Porto"),
    _o("pt_BR", "Brazil", "Portuguese", "São Paulo", "Rio de Janeiro"),
    _o("nl_NL", "Netherlands", "Dutch", "Amsterdam"),
    _o("sv_SE", "Sweden", "Swedish", "Stockholm"),
    _o("no_NO", "Norway", "Norwegian", "Oslo"),
    _o("da_DK", "Denmark", "Danish", "Copenhagen"),
    _o("fi_FI", "Finland", "Finnish", "Helsinki"),
    _o("pl_PL", "Poland", "Polish", "Warsaw", "Krakow"),
    _o("cs_CZ", "Czech Republic", "Czech", "Prague"),
    _o("hu_HU", "Hungary", "Hungarian", "Budapest"),
    _o("ro_RO", "Romania", "Romanian", "Bucharest"),
    _o("hr_HR", "Croatia", "Croatian", "Zagreb"),
    _o("sl_SI", "Slovenia", "Slovene", "Ljubljana"),
    _o("lv_LV", "Latvia", "Latvian", "Riga"),
    _o("et_EE", "Estonia", "Estonian", "Tallinn"),
    _o("tr_TR", "Turkey", "Turkish", "Istanbul"),
    _o("id_ID", "Indonesia", "Indonesian", "Jakarta"),
    _o("vi_VN", "Vietnam", "Vietnamese", "Hanoi"),
    _o("ja_JP", "Japan", "Japanese", "Tokyo", "Osaka", "Kyoto"),
    _o("zh_CN", "People's Republic of China", "Mandarin Chinese", "Beijing", "Shanghai"),
    _o("zh_TW", "Taiwan", "Mandarin Chinese", "Taipei"),
    _o("ru_RU", "Russia", "Russian", "Moscow", "Saint Petersburg"),
    _o("uk_UA", "Ukraine", "Ukrainian", "Kyiv"),
    _o("bg_BG", "Bulgaria", "Bulgarian", "Sofia"),
)
BY_LOCALE = {o.locale: o for o in ORIGINS}

_CYRILLIC = dict(
    zip(
        "абвгдеёжзийклмнопрстуфхцчшщъыьэюяієїґ",
        [
            "a",
            "b",
            "v",
            "g",
            "d",
            "e",
            "yo",
            "zh",
            "z",
            "i",
            "y",
            "k",
            "l",
            "m",
            "n",
            "o",
            "p",
            "r",
            "s",
            "t",
            "u",
            "f",
            "kh",
            "ts",
            "ch",
            "sh",
            "shch",
            "",
            "y",
            "",
            "e",
            "yu",
            "ya",
            "i",
            "ye",
            "yi",
            "g",
        ],
        strict=True,
    )
)


def transliterate(word: str) -> str:
    """Cyrillic to Latin (simplified BGN/PCGN), keeping the capital: 'Смирнов' -> 'Smirnov'."""
    out = "".join(_CYRILLIC.get(c.lower(), c.lower()) if c.isalpha() else c for c in word)
    return out[:1].upper() + out[1:] if word[:1].isupper() else out


def _latin_title(word: str) -> str:
    """'CHIA-HAO' -> 'Chia-Hao' (zh_TW romanizations are upper case)."""
    return "-".join(p[:1].upper() + p[1:].lower() for p in word.split("-")) if word.isupper() else word


@dataclass(frozen=True)
class NameLists:
    first: dict[str, tuple[str, ...]]  # gender -> first names
    last: dict[str, tuple[str, ...]]  # gender -> last names (the same list for both where names are not gendered)


def _attr(provider: type, *names: str) -> tuple[str, ...]:
    for name in names:
        value = getattr(provider, name, None)
        if value:
            return tuple(value.keys() if hasattr(value, "keys") else value)
    return ()


def _polish_feminine(name: str) -> str:
    for male, female in (("ski", "ska"), ("cki", "cka"), ("dzki", "dzka")):
        if name.endswith(male):
            return name[: -len(male)] + female
    return name


@cache
def _faker_providers() -> dict[str, type]:
    """Faker's person data of every origin, by locale (imported on first use: 0.3 s that the API and the command
    line do not pay at start). Plain imports, one per origin, so the dependency is in sight of the architecture
    test; they are read through locals() below."""
    from faker.providers.person import (  # noqa: F401
        bg_BG,
        cs_CZ,
        da_DK,
        de_AT,
        de_CH,
        de_DE,
        en_GB,
        en_IE,
        en_IN,
        en_KE,
        en_NZ,
        en_US,
        es_AR,
        es_CA,
        es_CL,
        es_CO,
        es_ES,
        es_MX,
        et_EE,
        fi_FI,
        fr_BE,
        fr_CA,
        fr_CH,
        fr_DZ,
        fr_FR,
        ha_NG,
        hr_HR,
        hu_HU,
        id_ID,
        ig_NG,
        it_IT,
        ja_JP,
        lv_LV,
        nl_BE,
        nl_NL,
        no_NO,
        pl_PL,
        pt_BR,
        pt_PT,
        ro_RO,
        ru_RU,
        sl_SI,
        sv_SE,
        tr_TR,
        tw_GH,
        uk_UA,
        vi_VN,
        yo_NG,
        zh_CN,
        zh_TW,
        zu_ZA,
    )

    modules = dict(locals())  # exactly the modules imported above, by locale
    return {locale: module.Provider for locale, module in modules.items()}


def _raw_lists(locale: str) -> NameLists:
    provider = _faker_providers()[locale]
    if locale in ("ja_JP", "zh_TW"):
        first = {g: _attr(provider, f"first_romanized_names_{g}", "first_romanized_names") for g in GENDERS}
        last = _attr(provider, "last_romanized_names")
        return NameLists(first, dict.fromkeys(GENDERS, last))
    if locale == "zh_CN":
        first = _attr(provider, "first_romanized_names")
        return NameLists(dict.fromkeys(GENDERS, first), dict.fromkeys(GENDERS, _attr(provider, "last_romanized_names")))
    first = {g: _attr(provider, f"first_names_{g}") for g in GENDERS}
    if locale == "pl_PL":  # Faker keeps Polish surnames as male -ski forms plus unisex ones
        male = _attr(provider, "male_last_names") + _attr(provider, "unisex_last_names")
        return NameLists(first, {"male": male, "female": tuple(_polish_feminine(n) for n in male)})
    last = {g: _attr(provider, f"last_names_{g}", "last_names") for g in GENDERS}
    return NameLists(first, last)


def _clean(names: tuple[str, ...], locale: str) -> tuple[str, ...]:
    """Single-token Latin names only (a look-alike or null name must split into a first and a last name)."""
    out = []
    for name in names:
        if locale in ("ru_RU", "uk_UA", "bg_BG"):
            name = transliterate(name)
        name = _latin_title(name.strip())
        if name and all(c.isalpha() or c in "-'" for c in name) and _is_latin(name):
            out.append(name)
    return tuple(dict.fromkeys(out))


def _is_latin(word: str) -> bool:
    return all("LATIN" in unicodedata.name(c, "") for c in word if c.isalpha())


@cache
def name_lists(locale: str) -> NameLists:
    """First and last names of one origin, per gender, cleaned to single Latin-script tokens."""
    if locale not in BY_LOCALE:
        raise KeyError(f"unknown name origin {locale!r}")
    raw = _raw_lists(locale)
    return NameLists(
        {g: _clean(raw.first[g], locale) for g in GENDERS}, {g: _clean(raw.last[g], locale) for g in GENDERS}
    )
